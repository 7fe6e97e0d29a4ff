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
// commit returned. NOTIFY is on with the store's default scheme.
//
// The cases take turns in WriteRounds rounds, each round starting one case
// later than the last, so that none always runs first or after the same
// neighbour: on a shared host the rate drifts over a minute (autovacuum,
// checkpoints, other jobs), and in one fixed order the reference ran
// before ours every time. A cell reports its case's median rate over the
// rounds, the latency of all its commits and its CPU per transaction over
// all rounds; x_hand is the median over the rounds of the cell's rate over
// the reference's in the same round.
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
	cases := []writeCase{{name: "UPDATE only (no outbox)"}, {name: "UPDATE + hand-written INSERT (reference)", hand: true},
		{name: "UPDATE + 1 keyed event", events: 1, keyed: true}, {name: "UPDATE + 1 unkeyed event", events: 1},
		{name: "UPDATE + 10 keyed events", events: 10, keyed: true}}
	const reference = 1 // cases[reference] is the hand-written INSERT
	for _, writers := range []int{1, 16} {
		t := make([]writeTally, len(cases))
		for round := range r.o.WriteRounds {
			rates := make([]float64, len(cases))
			for k := range cases {
				i := (k + round) % len(cases)
				lat, el, cpu, err := r.writeCell(ctx, e, cases[i], writers)
				if err != nil {
					return err
				}
				rates[i] = t[i].add(lat, el, cpu)
			}
			for i, c := range cases {
				if c.events > 0 && rates[reference] > 0 {
					t[i].xHand = append(t[i].xHand, rates[i]/rates[reference])
				}
			}
		}
		for i, c := range cases {
			r.add(t[i].result(c, writers))
		}
	}
	return nil
}

// writeCase is one kind of transaction of the write path.
type writeCase struct {
	name   string
	events int  // enqueued per transaction
	keyed  bool // with a key
	hand   bool // the hand-written INSERT instead
}

// writeCell runs c's transactions on writers goroutines for WriteFor, on
// emptied tables, and returns each commit's latency, the time it took
// and the CPU it cost in all, in µs (cpuMeter's metrics for one event).
func (r *runner) writeCell(ctx context.Context, e *env, c writeCase, writers int) ([]time.Duration, time.Duration, map[string]float64, error) {
	for _, q := range []string{`TRUNCATE ` + e.table(), `TRUNCATE hand`, `VACUUM biz`} {
		if _, err := e.pool.Exec(ctx, q); err != nil {
			return nil, 0, nil, err
		}
	}
	payload := make([]byte, payloadSize)
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
		return nil, 0, nil, err
	}
	return lat, el, cpu.perEvent(1), nil
}

// writeTally is a write-path case's rounds: its rates, every commit's
// latency, its CPU in all (µs, by metric), and its ratios to the
// reference in the same round.
type writeTally struct {
	rates, xHand []float64
	lat          []time.Duration
	cpu          map[string]float64
	seconds      float64
}

// add records a round's cell and returns its rate.
func (t *writeTally) add(lat []time.Duration, el time.Duration, cpu map[string]float64) float64 {
	rate := float64(len(lat)) / el.Seconds()
	t.rates = append(t.rates, rate)
	t.lat = append(t.lat, lat...)
	t.seconds += el.Seconds()
	if t.cpu == nil {
		t.cpu = map[string]float64{}
	}
	for m, v := range cpu {
		t.cpu[m] += v
	}
	return rate
}

// result is the case's cell: its median rate, the latency of all its
// commits, its CPU per transaction (the writers', this process, and the
// database's, so that a gap shows on which side it is), and x_hand, the
// median of its rounds' ratios to the reference.
func (t *writeTally) result(c writeCase, writers int) Result {
	res := Result{Workload: "write", Case: fmt.Sprintf("%2d writers, %s", writers, c.name),
		Params: map[string]any{"writers": writers, "events_per_tx": c.events, "keyed": c.keyed, "reference": c.hand,
			"seconds": t.seconds, "rounds": len(t.rates), "round_commits_per_s": t.rates},
		Metrics: map[string]float64{"commits_per_s": median(t.rates), "p50_ms": pct(t.lat, 50), "p99_ms": pct(t.lat, 99)}}
	if n := float64(len(t.lat)); n > 0 {
		res.Metrics["writer_cpu_us"] = t.cpu["relay_cpu_us"] / n
		if v, ok := t.cpu["pg_cpu_us"]; ok {
			res.Metrics["pg_cpu_us"] = v / n
		}
	}
	if len(t.xHand) > 0 {
		res.Metrics["x_hand"] = median(t.xHand)
	}
	return res
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

// median returns the median of xs (the mean of the middle two when their
// number is even), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return (s[len(s)/2] + s[(len(s)-1)/2]) / 2
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
