package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// scale drains ScaleN events (1,000 keys) with 1, 2 and 4 relays (each with
// its own pool and JetStream connection, 2 workers), ordered and unordered,
// against a broker that is the limit: every publisher is wrapped in
// ackDelayPublisher, so each Publish call's acknowledgements come one after
// another, ScaleAckDelay (1ms) each, without using CPU. One worker then moves
// at most 1/ScaleAckDelay events/s, and the ideal is relays × workers times
// that. Batch size 100, so 4 relays × 2 workers hold at most 800 of the
// 1,000 keys and ordered claims are not short of heads. Each cell reports
// its rate as a ratio to the same mode's 1-relay cell (x_one_relay) and to
// the broker bound (x_ack_bound).
func (r *runner) scale(ctx context.Context) error {
	perAck := r.o.ScaleAckDelay
	for _, unordered := range []bool{true, false} {
		mode := map[bool]string{true: "unordered", false: "ordered"}[unordered]
		var one float64
		for _, relays := range []int{1, 2, 4} {
			cfg := &relay.Config{BatchSize: 100, Unordered: unordered}
			res, err := r.drainRelay(ctx, r.o.ScaleN, keyCount, relays, perAck, cfg)
			if err != nil {
				return fmt.Errorf("%s, %d relays: %w", mode, relays, err)
			}
			rate := res.Metrics["events_per_s"]
			if relays == 1 {
				one = rate
			}
			if one > 0 {
				res.Metrics["x_one_relay"] = rate / one
			}
			bound := float64(relays*or(cfg.Workers, relay.DefaultWorkers)) / perAck.Seconds()
			res.Metrics["ack_bound_per_s"] = bound
			res.Metrics["x_ack_bound"] = rate / bound
			res.Workload, res.Case = "scale", fmt.Sprintf("%s, %d relay(s), %v/ack", mode, relays, perAck)
			r.add(res)
		}
	}
	return nil
}

// history times one Claim of 1,000 + Abort (median and p99 of
// HistoryReps, or of as many as a minute allows, at least 5) with 2,000 keyed pending events, first with no published
// rows in the table, then with HistoryN published rows (status 1) kept,
// inserted with one INSERT … SELECT generate_series per million rows
// (sequential UUIDs, 200-byte payloads) and vacuumed.
func (r *runner) history(ctx context.Context) error {
	e, err := r.newEnv(ctx, "obb_history", nil, 0)
	if err != nil {
		return err
	}
	defer e.close()
	if err := e.seed(ctx, 2000, payloadSize, keyCount); err != nil {
		return err
	}
	measure := func(kept int) error {
		for _, unordered := range []bool{false, true} {
			mode := map[bool]string{true: "unordered", false: "ordered"}[unordered]
			var lat []time.Duration
			t := time.Now()
			for i := 0; i < r.o.HistoryReps && (i < 5 || time.Since(t) < time.Minute); i++ {
				t0 := time.Now()
				b, err := e.store.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now(), Unordered: unordered})
				if err != nil {
					return err
				}
				got := len(b.Records())
				if err := b.Abort(ctx); err != nil {
					return err
				}
				lat = append(lat, time.Since(t0))
				if got != 1000 {
					return fmt.Errorf("claimed %d, want 1000", got)
				}
			}
			r.add(Result{Workload: "history", Case: fmt.Sprintf("%s claim of 1000, %d published kept", mode, kept),
				Params:  map[string]any{"published_rows": kept, "unordered": unordered, "reps": len(lat), "pending": 2000},
				Metrics: map[string]float64{"median_ms": pct(lat, 50), "p99_ms": pct(lat, 99)}})
		}
		return nil
	}
	if err := measure(0); err != nil {
		return err
	}
	start := time.Now()
	const chunk = 1_000_000
	for lo := 0; lo < r.o.HistoryN; lo += chunk {
		hi := min(r.o.HistoryN, lo+chunk)
		_, err := e.pool.Exec(ctx, `INSERT INTO `+e.table()+` (id, topic, key, type, payload, created_at, available_at, status, published_at)
			SELECT lpad(to_hex(g), 32, '0')::uuid, 'bench', (g % 1000)::text, 'Bench', convert_to(repeat('x', $3), 'UTF8'),
				now() - interval '1 day', now() - interval '1 day', 1, now() - interval '1 day'
			FROM generate_series($1::bigint, $2::bigint) g`, lo+1, hi, payloadSize)
		if err != nil {
			return fmt.Errorf("history insert: %w", err)
		}
	}
	if _, err := e.pool.Exec(ctx, `VACUUM ANALYZE `+e.table()); err != nil {
		return err
	}
	r.logf("  inserted %d published rows in %v", r.o.HistoryN, time.Since(start).Round(time.Second))
	return measure(r.o.HistoryN)
}
