package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
)

const schedHeader = "Bench-Sched"

// latency measures commit → delivery latency at a steady open-loop rate:
// send times are scheduled up front (rate × duration events) and each
// event carries its scheduled time; a JetStream consumer records when it
// receives it. Latency is receive time − scheduled time, so a writer or
// relay that falls behind is charged for it (no coordinated omission);
// Options.LatencyPoisson spaces them as a Poisson process. The
// relay is the default configuration (ordered, 2 workers, batch 1,000);
// events have one of 1,000 keys. Modes: the hand-written LISTEN/NOTIFY
// relay (handListen), the reference; ours with LISTEN/NOTIFY wake-ups on;
// off (NOTIFY off as well) with the default 1s poll; off with a 100ms poll.
// Each cell also reports PostgreSQL's CPU per event (writers and relay
// together), and ours their ratios to the reference at the same rate, and
// the writers' share of the latency: scheduled send → Commit() returned
// (commit_p50_ms, commit_p99_ms); what is left of the p50 is the relay's
// and the broker's.
func (r *runner) latency(ctx context.Context) error {
	modes := []latencyMode{{name: "hand-written LISTEN/NOTIFY relay (reference)", hand: true, listen: true},
		{name: "LISTEN/NOTIFY", listen: true}, {name: "polling 1s (default)", poll: time.Second}, {name: "polling 100ms", poll: 100 * time.Millisecond}}
	for _, rate := range r.o.LatencyRates {
		for _, m := range modes {
			res, err := r.latencyCell(ctx, rate, m)
			if err != nil {
				return fmt.Errorf("%d ev/s, %s: %w", rate, m.name, err)
			}
			arrivals := ""
			if r.o.LatencyPoisson {
				arrivals = " Poisson"
			}
			res.Case = fmt.Sprintf("%5d ev/s%s, %s", rate, arrivals, m.name)
			r.add(res)
		}
	}
	return nil
}

// latencyMode is one way of moving events in the latency workload.
type latencyMode struct {
	name   string
	hand   bool          // the hand-written reference instead of our relay
	listen bool          // LISTEN/NOTIFY on
	poll   time.Duration // our relay's PollInterval
}

func (r *runner) latencyCell(ctx context.Context, rate int, m latencyMode) (Result, error) {
	const writers = 16
	e, err := r.newEnv(ctx, "obb_latency", &postgres.Config{DisableNotify: !m.listen}, writers+2)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	var (
		write func(ctx context.Context, tx pgx.Tx, key string, payload []byte, sched string) error
		stats func(*Result)
	)
	if m.hand {
		h, err := startHandListen(ctx, e)
		if err != nil {
			return Result{}, err
		}
		defer func() { _ = h.stop() }()
		write = h.write
	} else {
		rl, err := startLatencyRelay(ctx, e, m)
		if err != nil {
			return Result{}, err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = rl.Stop(sctx)
		}()
		write = func(ctx context.Context, tx pgx.Tx, key string, payload []byte, sched string) error {
			return e.ob.Enqueue(ctx, tx, outbox.Message{Topic: "bench", Key: key, Type: "Bench",
				Payload: payload, Headers: map[string]string{schedHeader: sched}})
		}
		stats = func(res *Result) {
			st := rl.Stats()
			res.Metrics["relay_claims"] = float64(st.Claims)
			res.Metrics["relay_batches"] = float64(st.Batches)
			res.Metrics["relay_outages"] = float64(st.Outages)
			res.Metrics["relay_store_errors"] = float64(st.StoreErrors)
		}
	}

	n := int(float64(rate) * r.o.LatencyFor.Seconds())
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var received atomic.Int64
	cons, err := e.js.OrderedConsumer(ctx, e.name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.name + ".>"}})
	if err != nil {
		return Result{}, err
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		now := time.Now()
		if v := msg.Headers()[schedHeader]; len(v) > 0 {
			if ns, err := strconv.ParseInt(v[0], 10, 64); err == nil {
				mu.Lock()
				lat = append(lat, now.Sub(time.Unix(0, ns)))
				mu.Unlock()
			}
		}
		received.Add(1)
	})
	if err != nil {
		return Result{}, err
	}
	defer cc.Stop()
	time.Sleep(100 * time.Millisecond)

	// Open the writers' connections before the clock starts.
	var conns []*pgxpool.Conn
	for range writers {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return Result{}, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}

	payload := make([]byte, payloadSize)
	commits := make([]time.Duration, 0, n) // scheduled send → Commit() returned
	jobs := make(chan time.Time, n)
	var wg sync.WaitGroup
	var werr atomic.Value
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for t := range jobs {
				err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
					return write(ctx, tx, strconv.Itoa(rng.IntN(keyCount)), payload, strconv.FormatInt(t.UnixNano(), 10))
				})
				if err != nil {
					werr.CompareAndSwap(nil, err)
					continue
				}
				d := time.Since(t)
				mu.Lock()
				commits = append(commits, d)
				mu.Unlock()
			}
		})
	}
	cpu := startCPU()
	start := time.Now().Add(10 * time.Millisecond)
	sched := schedule(n, rate, r.o.LatencyPoisson)
	for i := range n {
		t := start.Add(sched[i])
		if d := time.Until(t); d > 0 {
			time.Sleep(d)
		}
		jobs <- t
	}
	close(jobs)
	wg.Wait()
	written := time.Since(start)
	if v := werr.Load(); v != nil {
		return Result{}, v.(error)
	}
	// Wait for the rest while deliveries progress (an overloaded cell may
	// take long after the last commit), at most 3 minutes.
	last, lastAt, end := received.Load(), time.Now(), time.Now().Add(3*time.Minute)
	for received.Load() < int64(n) && time.Now().Before(end) && time.Since(lastAt) < 15*time.Second+2*m.poll {
		time.Sleep(10 * time.Millisecond)
		if v := received.Load(); v != last {
			last, lastAt = v, time.Now()
		}
	}
	pg := cpu.perEvent(n)["pg_cpu_us"]
	mu.Lock()
	defer mu.Unlock()
	res := Result{Workload: "latency",
		Params: map[string]any{"rate": rate, "poisson": r.o.LatencyPoisson, "reference": m.hand, "listen": m.listen, "poll_ms": m.poll.Milliseconds(), "seconds": r.o.LatencyFor.Seconds(), "n": n, "writers": writers},
		Metrics: map[string]float64{"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "p999_ms": pct(lat, 99.9), "max_ms": pct(lat, 100),
			"commit_p50_ms": pct(commits, 50), "commit_p99_ms": pct(commits, 99),
			"committed_per_s": float64(n) / written.Seconds(), "received": float64(len(lat)), "sent": float64(n)}}
	if pg > 0 {
		res.Metrics["pg_cpu_us"] = pg
	}
	if stats != nil {
		stats(&res)
	}
	if len(lat) < n {
		res.Note = fmt.Sprintf("received %d of %d events before deliveries stopped progressing; percentiles cover those received", len(lat), n)
		r.logf("  %s", res.Note)
	}
	if len(lat) == 0 {
		return Result{}, fmt.Errorf("received none of %d events", n)
	}
	return res, nil
}

// schedule returns the send times of n events at rate per second, from
// the cell's start: evenly spaced, or with poisson the arrivals of a
// Poisson process (exponential gaps; the same seed for every cell, so that
// the reference and our relay get the same bursts).
func schedule(n, rate int, poisson bool) []time.Duration {
	out := make([]time.Duration, n)
	rng := rand.New(rand.NewPCG(uint64(rate), 2))
	var at float64 // seconds, Poisson
	for i := range out {
		if !poisson {
			out[i] = time.Duration(i) * time.Second / time.Duration(rate)
			continue
		}
		at += rng.ExpFloat64() / float64(rate)
		out[i] = time.Duration(at * float64(time.Second))
	}
	return out
}

// startLatencyRelay starts our relay for a latency cell and, with
// LISTEN/NOTIFY on, returns once it listens, so the first events are not
// charged for a listener still connecting.
func startLatencyRelay(ctx context.Context, e *env, m latencyMode) (*relay.Relay, error) {
	rpool, err := e.extraPool(ctx, 0)
	if err != nil {
		return nil, err
	}
	s, err := newStore(rpool, e)
	if err != nil {
		return nil, err
	}
	pub, err := e.publisher()
	if err != nil {
		return nil, err
	}
	rl, err := relay.New(s, pub, &relay.Config{DisableListen: !m.listen, PollInterval: m.poll})
	if err != nil {
		return nil, err
	}
	if err := rl.Start(ctx); err != nil {
		return nil, err
	}
	if !m.listen {
		return rl, nil
	}
	for i := 0; ; i++ {
		var k int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			`LISTEN "`+e.name+`_messages"`).Scan(&k); err != nil {
			return rl, err
		}
		if k > 0 {
			return rl, nil
		}
		if i == 500 {
			return rl, fmt.Errorf("the relay is not listening after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
