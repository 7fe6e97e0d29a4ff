package saga

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Report is what a run did and what the verification found.
type Report struct {
	// The settings: orders, relays per outbox, the outage asked for (zero:
	// none), whether a relay was to crash.
	Orders, Relays int
	Outage         time.Duration
	Crash          bool
	// DataDir is where the files were; Kept says they still are.
	DataDir string
	Kept    bool

	// Confirmed orders (the orders service committed them).
	Confirmed int
	// Reserved: confirmed orders with exactly one reservation.
	Reserved int
	// Lost: confirmed orders without a reservation.
	Lost int
	// AppliedTwice: orders with more than one reservation.
	AppliedTwice int
	// Phantom: reservations of orders that were never confirmed.
	Phantom int
	// Complete: orders whose StockReserved came back to the orders service.
	Complete int
	// StockExpected is the units the confirmed orders bought; StockTaken
	// the units the stock levels went down by. They must be equal.
	StockExpected, StockTaken int64
	// PendingLeft: events still in either outbox at the end.
	PendingLeft int64

	// Published counts events the broker acknowledged to the relays
	// (re-publishes included); BrokerDuplicates those the stream's
	// duplicate window dropped; DuplicatesDropped the redeliveries the
	// inboxes dropped; Crashed the events of the batch the crashed relay
	// published and never marked.
	Published, BrokerDuplicates, DuplicatesDropped int64
	Crashed                                        int
	// PeakBacklog is the largest outbox backlog seen (both outboxes).
	PeakBacklog int64

	// Timings: confirming every order; the broker's actual downtime; from
	// its return to an empty backlog; from the last order to the saga's
	// completion; the whole run. LatencyP50/P99: from an order's
	// confirmation to its StockReserved coming back.
	ConfirmTime, BrokerDown, Drain, Settle, Total time.Duration
	LatencyP50, LatencyP99, LatencyMax            time.Duration
}

// OK reports whether the verification passed: every confirmed order has
// exactly one reservation and came back complete, none is lost, none
// applied twice, no phantom, stock levels match, outboxes empty.
func (r Report) OK() bool {
	return r.Confirmed == r.Orders && r.Reserved == r.Confirmed && r.Lost == 0 && r.AppliedTwice == 0 &&
		r.Phantom == 0 && r.Complete == r.Confirmed && r.StockExpected == r.StockTaken && r.PendingLeft == 0
}

func (r Report) summary() string {
	return fmt.Sprintf("%d orders confirmed, %d reserved exactly once, %d lost, %d applied twice, %d phantom, %d complete, stock taken %d of %d, %d events left in the outboxes",
		r.Confirmed, r.Reserved, r.Lost, r.AppliedTwice, r.Phantom, r.Complete, r.StockTaken, r.StockExpected, r.PendingLeft)
}

// verify reads both databases and fills the verification fields of r.
func verify(ctx context.Context, ordersDB, stockDB *sql.DB, r *Report) error {
	// The orders service's view: which orders it confirmed, what they
	// bought, and when their reservation came back.
	type order struct {
		qty                 int64
		confirmed, reserved sql.NullInt64
		status              string
	}
	orders := map[int64]order{}
	rows, err := ordersDB.QueryContext(ctx, `SELECT id, qty, status, confirmed_at, reserved_at FROM orders`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var o order
		if err := rows.Scan(&id, &o.qty, &o.status, &o.confirmed, &o.reserved); err != nil {
			return err
		}
		orders[id] = o
	}
	if err := rows.Err(); err != nil {
		return err
	}

	// The stock service's view: reservations per order.
	reservations := map[int64]int{}
	rrows, err := stockDB.QueryContext(ctx, `SELECT order_id, count(*) FROM reservations GROUP BY order_id`)
	if err != nil {
		return err
	}
	defer rrows.Close()
	for rrows.Next() {
		var id int64
		var n int
		if err := rrows.Scan(&id, &n); err != nil {
			return err
		}
		reservations[id] = n
	}
	if err := rrows.Err(); err != nil {
		return err
	}
	var onHand int64
	if err := stockDB.QueryRowContext(ctx, `SELECT sum(on_hand) FROM stock`).Scan(&onHand); err != nil {
		return err
	}
	r.StockTaken = int64(len(skus))*initialStock - onHand

	var latencies []time.Duration
	for id, o := range orders {
		n := reservations[id]
		if o.status == "pending" {
			if n > 0 {
				r.Phantom++
			}
			continue
		}
		r.Confirmed++
		r.StockExpected += o.qty
		switch n {
		case 0:
			r.Lost++
		case 1:
			r.Reserved++
		default:
			r.AppliedTwice++
		}
		if o.status == "reserved" {
			r.Complete++
			latencies = append(latencies, time.Duration(o.reserved.Int64-o.confirmed.Int64)*time.Microsecond)
		}
	}
	for id := range reservations {
		if _, ok := orders[id]; !ok {
			r.Phantom++
		}
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		r.LatencyP50 = latencies[len(latencies)/2]
		r.LatencyP99 = latencies[min(len(latencies)-1, len(latencies)*99/100)]
		r.LatencyMax = latencies[len(latencies)-1]
	}
	for _, db := range []*sql.DB{ordersDB, stockDB} {
		var n int64
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM outbox_messages WHERE status = 0`).Scan(&n); err != nil {
			return err
		}
		r.PendingLeft += n
	}
	return nil
}

// print writes the verification and the timings.
func (r Report) print(out *printer) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	out.plain("")
	if r.OK() {
		out.plain("verification: OK: every confirmed order has exactly one reservation (%d/%d); 0 lost, 0 applied twice, 0 phantom; stock down by %d units, as ordered; saga complete for %d/%d orders",
			r.Reserved, r.Confirmed, r.StockTaken, r.Complete, r.Confirmed)
	} else {
		out.plain("verification: FAILED: %s", r.summary())
	}
	out.plain("delivery:     %d events published; %d dropped by the broker's duplicate window; %d redelivered and dropped by the inboxes",
		r.Published, r.BrokerDuplicates, r.DuplicatesDropped)
	if r.Crash {
		out.plain("crash:        the crashed relay's batch (%s) was published twice; the inbox made it one effect each", plural(r.Crashed, "event"))
	}
	if r.Outage > 0 {
		out.plain("outage:       broker down %s; peak outbox backlog %d events; drained %s after the broker came back",
			ms(r.BrokerDown), r.PeakBacklog, ms(r.Drain))
	}
	out.plain("timings:      orders confirmed over %s (%.0f/s); saga complete %s after the last order; total %s",
		ms(r.ConfirmTime), float64(r.Confirmed)/max(r.ConfirmTime.Seconds(), 1e-9), ms(r.Settle), ms(r.Total))
	out.plain("latency:      order confirmed → stock reserved → back at the orders service: p50 %s, p99 %s, max %s",
		ms(r.LatencyP50), ms(r.LatencyP99), ms(r.LatencyMax))
	if r.Kept {
		out.plain("files:        kept in %s (orders.db, stock.db, nats/)", r.DataDir)
	}
}
