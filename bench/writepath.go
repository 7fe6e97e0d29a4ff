package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
)

// writePath measures what the outbox adds to a business transaction: 1
// and 16 concurrent writers, each transaction one UPDATE of a random row of
// 10,000 plus nothing (no outbox), a hand-written INSERT into a plain table
// (the reference), or 1 or 10 enqueued events (200 bytes, one of 1,000
// keys, or unkeyed), for a fixed duration per cell. Latency is begin →
// commit returned. NOTIFY is on with the store's default scheme; x_hand is
// a cell's rate over the reference's with as many writers.
func (r *runner) writePath(ctx context.Context) error {
	e, err := r.newEnv(ctx, "obb_write", nil, 34)
	if err != nil {
		return err
	}
	defer e.close()
	for _, q := range []string{`CREATE TABLE biz (id int PRIMARY KEY, n bigint NOT NULL DEFAULT 0)`,
		`INSERT INTO biz (id) SELECT generate_series(1, 10000)`, `VACUUM ANALYZE biz`,
		`CREATE TABLE hand (seq bigserial PRIMARY KEY, id uuid NOT NULL, topic text NOT NULL, key text NOT NULL,
			payload bytea NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			return err
		}
	}
	payload := make([]byte, payloadSize)
	type writeCase struct {
		name   string
		events int  // enqueued per transaction
		keyed  bool // with a key
		hand   bool // the hand-written INSERT instead
	}
	cases := []writeCase{{name: "UPDATE only (no outbox)"}, {name: "UPDATE + hand-written INSERT (reference)", hand: true},
		{name: "UPDATE + 1 keyed event", events: 1, keyed: true}, {name: "UPDATE + 1 unkeyed event", events: 1},
		{name: "UPDATE + 10 keyed events", events: 10, keyed: true}}
	for _, writers := range []int{1, 16} {
		hand := 0.0
		for _, c := range cases {
			for _, q := range []string{`TRUNCATE ` + e.table(), `TRUNCATE hand`, `VACUUM biz`} {
				if _, err := e.pool.Exec(ctx, q); err != nil {
					return err
				}
			}
			cpu := startCPU()
			lat, el, err := runWriters(ctx, writers, r.o.WriteFor, func(rng *rand.Rand) error {
				return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `UPDATE biz SET n = n + 1 WHERE id = $1`, rng.IntN(10000)+1); err != nil {
						return err
					}
					if c.hand {
						_, err := tx.Exec(ctx, `INSERT INTO hand (id, topic, key, payload) VALUES ($1, $2, $3, $4)`,
							uuid.New(), "bench", strconv.Itoa(rng.IntN(keyCount)), payload)
						return err
					}
					if c.events == 0 {
						return nil
					}
					msgs := make([]outbox.Message, c.events)
					for i := range msgs {
						msgs[i] = outbox.Message{Topic: "bench", Type: "Bench", Payload: payload}
						if c.keyed {
							msgs[i].Key = strconv.Itoa(rng.IntN(keyCount))
						}
					}
					return e.ob.Enqueue(ctx, tx, msgs...)
				})
			})
			if err != nil {
				return err
			}
			rate := float64(len(lat)) / el.Seconds()
			res := Result{Workload: "write", Case: fmt.Sprintf("%2d writers, %s", writers, c.name),
				Params:  map[string]any{"writers": writers, "events_per_tx": c.events, "keyed": c.keyed, "reference": c.hand, "seconds": el.Seconds()},
				Metrics: map[string]float64{"commits_per_s": rate, "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99)}}
			// CPU per transaction: the writers' (this process) and the
			// database's, so that a gap shows on which side it is.
			if n := len(lat); n > 0 {
				m := cpu.perEvent(n)
				res.Metrics["writer_cpu_us"] = m["relay_cpu_us"]
				if v, ok := m["pg_cpu_us"]; ok {
					res.Metrics["pg_cpu_us"] = v
				}
			}
			if c.hand {
				hand = rate
			}
			if c.events > 0 && hand > 0 {
				res.Metrics["x_hand"] = rate / hand
			}
			r.add(res)
		}
	}
	return nil
}

// runWriters runs fn in a loop on n goroutines for d and returns every
// call's latency.
func runWriters(ctx context.Context, n int, d time.Duration, fn func(*rand.Rand) error) ([]time.Duration, time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	var firstErr error
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var lat []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				if err := fn(rng); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, time.Since(start), firstErr
}

// pct returns the p-th percentile of ds in milliseconds (nearest rank).
func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	i = max(0, min(len(s)-1, i))
	return float64(s[i]) / float64(time.Millisecond)
}
