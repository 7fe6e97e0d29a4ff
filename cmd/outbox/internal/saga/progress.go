package saga

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/nats/natsembed"
	"github.com/outboxgo/outbox/stores"
)

// printer writes lines prefixed with the time since the start; it is safe
// for concurrent use.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	clock outbox.Clock
	start time.Time
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el := p.clock.Now().Sub(p.start)
	fmt.Fprintf(p.w, "%6.1fs  %s\n", el.Seconds(), fmt.Sprintf(format, args...))
}

// plain writes a line without the time.
func (p *printer) plain(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// monitor samples the run's state for the progress lines and the timings.
type monitor struct {
	orders, stock *service
	rs            *relays
	confirmed     *atomic.Int64
	stockCounts   *counts
	ordersCounts  *counts
	srv           *natsembed.Server
	js            jetstream.JetStream
	total         int

	mu          sync.Mutex
	peakBacklog int64
	down, up    time.Time // the outage
	drainedAt   time.Time // the backlog first emptied after the outage
}

func (m *monitor) setDown(t time.Time) { m.mu.Lock(); m.down = t; m.mu.Unlock() }
func (m *monitor) setUp(t time.Time)   { m.mu.Lock(); m.up = t; m.mu.Unlock() }

// isUp reports whether the broker is back from the outage.
func (m *monitor) isUp() bool { m.mu.Lock(); defer m.mu.Unlock(); return !m.up.IsZero() }

func (m *monitor) peak() int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.peakBacklog }

// drainTime is how long the backlog took to empty once the broker was back.
func (m *monitor) drainTime() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.up.IsZero() || m.drainedAt.IsZero() {
		return 0
	}
	return m.drainedAt.Sub(m.up)
}

// sample reads the outbox backlogs and the completed orders, and keeps the
// peak backlog and the moment the backlog of the outage was gone: no event
// enqueued before the broker came back still pending.
func (m *monitor) sample(ctx context.Context, now time.Time) (ordersPending, stockPending, complete int64, err error) {
	var oldest time.Time
	for _, x := range []struct {
		svc     *service
		pending *int64
	}{{m.orders, &ordersPending}, {m.stock, &stockPending}} {
		st, err := x.svc.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
		if err != nil {
			return 0, 0, 0, err
		}
		for _, t := range st {
			*x.pending += t.Pending
			if !t.OldestPending.IsZero() && (oldest.IsZero() || t.OldestPending.Before(oldest)) {
				oldest = t.OldestPending
			}
		}
	}
	if err = m.orders.db.QueryRowContext(ctx, `SELECT count(*) FROM orders WHERE status = 'reserved'`).Scan(&complete); err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peakBacklog = max(m.peakBacklog, ordersPending+stockPending)
	if !m.up.IsZero() && m.drainedAt.IsZero() && (oldest.IsZero() || oldest.After(m.up)) {
		m.drainedAt = now
	}
	return
}

// line prints one progress line.
func (m *monitor) line(out *printer) {
	op, sp, complete, err := m.sample(context.Background(), out.clock.Now())
	if err != nil {
		out.printf("progress: %v", err)
		return
	}
	broker := "up"
	if !m.srv.Running() {
		broker = "DOWN"
	}
	out.printf("confirmed %*d/%d | outbox pending %4d orders %4d stock | published %5d | stock reserved %*d | saga complete %*d | duplicates dropped %d | broker %s",
		width(m.total), m.confirmed.Load(), m.total, op, sp, m.rs.published(),
		width(m.total), m.stockCounts.handled.Load(), width(m.total), complete,
		m.stockCounts.duplicates.Load()+m.ordersCounts.duplicates.Load(), broker)
}

func width(n int) int { return len(fmt.Sprint(n)) }

// run samples the state every sampleEvery (for the peak backlog and the
// drain time) and prints a progress line every printEvery, until ctx ends.
func (m *monitor) run(ctx context.Context, out *printer, printEvery, sampleEvery time.Duration) {
	sample := time.NewTicker(min(sampleEvery, printEvery))
	defer sample.Stop()
	printT := time.NewTicker(printEvery)
	defer printT.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-printT.C:
			m.line(out)
		case <-sample.C:
			_, _, _, _ = m.sample(ctx, out.clock.Now())
		}
	}
}

// waitComplete polls until the saga is complete — every confirmed order
// reserved and back, both outboxes empty, both consumers caught up — or the
// timeout passes (false).
func (m *monitor) waitComplete(ctx context.Context, timeout time.Duration) (bool, error) {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		complete, err := m.complete(ctx)
		if err != nil || complete {
			return complete, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

func (m *monitor) complete(ctx context.Context) (bool, error) {
	op, sp, complete, err := m.sample(ctx, m.rs.clock.Now())
	if err != nil {
		return false, err
	}
	if op+sp > 0 || complete < m.confirmed.Load() || !m.srv.Running() {
		return false, nil
	}
	for _, durable := range []string{m.stock.name, m.orders.name} {
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		n, err := backlog(bctx, m.js, durable)
		cancel()
		if err != nil || n > 0 {
			return false, nil //nolint:nilerr // the broker may be reconnecting: look again
		}
	}
	return true, nil
}
