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
	"github.com/outboxgo/outbox/internal/cputime"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
)

const schedHeader = "Bench-Sched"

// warmSched is the schedHeader value of a warm-up event: not measured.
const warmSched = "warm"

// latency measures commit → delivery latency at a steady open-loop rate:
// send times are scheduled up front (rate × duration events) and each
// event carries its scheduled time; a JetStream consumer records when it
// receives it. Latency is receive time − scheduled time, so a writer or
// relay that falls behind is charged for it (no coordinated omission);
// issue 15's measure, each event's Commit() returned → the relay learning
// of the broker's ack, is reported beside it (commit_ack_p50_ms,
// commit_ack_p99_ms). Each cell warms each relay up first
// (Options.LatencyWarmup, not measured);
// Options.LatencyPoisson spaces them as a Poisson process. The
// relay is the default configuration (ordered, 2 workers, batch 1,000);
// events have one of 1,000 keys. Modes: the hand-written LISTEN/NOTIFY
// relay (handListen), the reference; ours with LISTEN/NOTIFY wake-ups on;
// off (NOTIFY off as well) with the default 1s poll; off with a 100ms poll.
// With Options.LatencySlice, the reference and ours with LISTEN/NOTIFY
// share one cell, taking turns in slices of it (each with its own schema,
// stream and relay, the same writers), so that a spell of a loaded host
// lands on both rather than on whichever cell ran then.
// Each cell also reports PostgreSQL's CPU per event (writers and relay
// together; in a shared cell, each slice's to its mode), and ours their
// ratios to the reference at the same rate, and the writers' share of the
// latency: scheduled send → Commit() returned (commit_p50_ms,
// commit_p99_ms); what is left of the p50 is the relay's and the broker's.
func (r *runner) latency(ctx context.Context) error {
	ref := latencyMode{name: "hand-written LISTEN/NOTIFY relay (reference)", hand: true, listen: true}
	listen := latencyMode{name: "LISTEN/NOTIFY", listen: true}
	cells := [][]latencyMode{{ref}, {listen}}
	if r.o.LatencySlice > 0 {
		cells = [][]latencyMode{{ref, listen}}
	}
	cells = append(cells, []latencyMode{{name: "polling 1s (default)", poll: time.Second}},
		[]latencyMode{{name: "polling 100ms", poll: 100 * time.Millisecond}})
	for _, rate := range r.o.LatencyRates {
		for _, modes := range cells {
			results, err := r.latencyCell(ctx, rate, modes)
			if err != nil {
				return fmt.Errorf("%d ev/s, %s: %w", rate, modes[0].name, err)
			}
			arrivals := ""
			if r.o.LatencyPoisson {
				arrivals = " Poisson"
			}
			for i, res := range results {
				res.Case = fmt.Sprintf("%5d ev/s%s, %s", rate, arrivals, modes[i].name)
				r.add(res)
			}
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

// latencyWriters is how many writers a latency cell has, shared by its
// modes.
const latencyWriters = 16

// latencyLane is one mode of a latency cell: its schema and stream, its
// relay, its consumer, and what it measured.
type latencyLane struct {
	m     latencyMode
	e     *env
	write func(ctx context.Context, tx pgx.Tx, key string, payload []byte, sched string) error
	stats func(*Result)

	mu        sync.Mutex
	commits   []time.Duration     // scheduled send → Commit() returned
	committed map[int64]time.Time // when each event's Commit() returned, by its scheduled send (Unix ns)
	received  atomic.Int64        // measured events received
	warmed    atomic.Int64        // warm-up events received
	warm      Result              // the relay's counters at the warm-up's end (stats)
	sent      int                 // by latencyCell's scheduler, read once the writers are done
	pg        time.Duration       // PostgreSQL's CPU during this lane's slices
	st        stages              // each event's way after its commit
}

// stages records each event's way after its commit, each point as the
// time since the event's scheduled send (its schedHeader value): when the
// relay handed it to the broker's client, when the relay learnt of the
// broker's ack, and when the consumer received it (the latency). With the
// writers' commits before, they split an event's latency into the wake-up
// and claim, the publish, and the delivery. It also keeps when each event
// was first handed over and first acknowledged, for the spans from its
// Commit() returning (see between).
type stages struct {
	mu                    sync.Mutex
	sent, acked, received []time.Duration
	sentAt, ackedAt       map[int64]time.Time // by scheduled send (Unix ns), the first
}

func (s *stages) send(sched string, at time.Time)    { s.add(&s.sent, &s.sentAt, sched, at) }
func (s *stages) ack(sched string, at time.Time)     { s.add(&s.acked, &s.ackedAt, sched, at) }
func (s *stages) receive(sched string, at time.Time) { s.add(&s.received, nil, sched, at) }

func (s *stages) add(into *[]time.Duration, first *map[int64]time.Time, sched string, at time.Time) {
	ns, err := strconv.ParseInt(sched, 10, 64)
	if err != nil {
		return
	}
	s.mu.Lock()
	*into = append(*into, at.Sub(time.Unix(0, ns)))
	if first != nil {
		if *first == nil {
			*first = map[int64]time.Time{}
		}
		if _, seen := (*first)[ns]; !seen {
			(*first)[ns] = at
		}
	}
	s.mu.Unlock()
}

// between is, for each event in both from and to (by scheduled send), the
// time from its from to its to: from the writer's Commit() returning to
// the relay learning of the broker's ack is issue 15's latency; commit →
// handed to the broker's client and handed → acked split it into the
// relay's pickup (wake-up and claim) and the publish. The relay may
// publish an event before its writer sees the commit return (the server
// made it visible first): those count as zero, and early says how many
// there were.
func between(from, to map[int64]time.Time) (ds []time.Duration, early int) {
	ds = make([]time.Duration, 0, len(to))
	for sched, a := range to {
		c, ok := from[sched]
		if !ok {
			continue
		}
		d := a.Sub(c)
		if d < 0 {
			d, early = 0, early+1
		}
		ds = append(ds, d)
	}
	return ds, early
}

// stagedPublisher is our relay's publisher, recording each event's stages.
type stagedPublisher struct {
	*natspub.Publisher
	st *stages
}

func (p stagedPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	now := time.Now()
	for _, m := range msgs {
		p.st.send(m.Headers[schedHeader], now)
	}
	errs := p.Publisher.Publish(ctx, msgs)
	now = time.Now()
	for i, m := range msgs {
		if errs[i] == nil {
			p.st.ack(m.Headers[schedHeader], now)
		}
	}
	return errs
}

// startLane sets up a lane: its env, its relay (ours or the reference),
// and a consumer recording each event's latency. e.close stops them all.
func (r *runner) startLane(ctx context.Context, m latencyMode) (*latencyLane, error) {
	e, err := r.newEnv(ctx, "obb_latency", &postgres.Config{DisableNotify: !m.listen}, latencyWriters+2)
	if err != nil {
		return nil, err
	}
	l := &latencyLane{m: m, e: e, committed: map[int64]time.Time{}}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	if m.hand {
		h, err := startHandListen(ctx, e, &l.st)
		if err != nil {
			return nil, err
		}
		e.closes = append(e.closes, func() { _ = h.stop() })
		l.write = h.write
		l.stats = func(res *Result) {
			res.Metrics["relay_claims"] = float64(h.claims.Load())
			res.Metrics["relay_batches"] = float64(h.batches.Load())
		}
	} else {
		rl, err := startLatencyRelay(ctx, e, m, &l.st)
		if err != nil {
			return nil, err
		}
		e.closes = append(e.closes, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = rl.Stop(sctx)
		})
		l.write = func(ctx context.Context, tx pgx.Tx, key string, payload []byte, sched string) error {
			return e.ob.Enqueue(ctx, tx, outbox.Message{Topic: "bench", Key: key, Type: "Bench",
				Payload: payload, Headers: map[string]string{schedHeader: sched}})
		}
		l.stats = func(res *Result) {
			st := rl.Stats()
			res.Metrics["relay_claims"] = float64(st.Claims)
			res.Metrics["relay_batches"] = float64(st.Batches)
			res.Metrics["relay_outages"] = float64(st.Outages)
			res.Metrics["relay_store_errors"] = float64(st.StoreErrors)
		}
	}
	cons, err := e.js.OrderedConsumer(ctx, e.name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.name + ".>"}})
	if err != nil {
		return nil, err
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		switch v := msg.Headers()[schedHeader]; {
		case len(v) > 0 && v[0] == warmSched:
			l.warmed.Add(1)
		case len(v) > 0:
			l.st.receive(v[0], time.Now())
			l.received.Add(1)
		}
	})
	if err != nil {
		return nil, err
	}
	e.closes = append(e.closes, cc.Stop)
	// Open the writers' connections before the clock starts.
	var conns []*pgxpool.Conn
	for range latencyWriters {
		c, err := e.pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	ok = true
	return l, nil
}

// turn is the lane whose turn it is at offset at, when lanes take turns
// in slices of slice (one lane: always it).
func turn(at, slice time.Duration, lanes int) int {
	if lanes <= 1 || slice <= 0 {
		return 0
	}
	return int(at/slice) % lanes
}

// latencyJob is one scheduled event and the lane it goes to; a warm-up
// event is not measured.
type latencyJob struct {
	at   time.Time
	lane *latencyLane
	warm bool
}

// latencyCell runs one cell: rate events per second for LatencyFor per
// mode, the modes taking turns in slices of LatencySlice when there are
// several. Each mode first gets LatencyWarmup of events at that rate, in
// turn, not measured: a relay's first events pay for its connections, its
// prepared statements and the broker's first round trips (the
// reference's as ours), and in a cell of seconds they would set its p99.
// It returns a result per mode, in modes' order.
func (r *runner) latencyCell(ctx context.Context, rate int, modes []latencyMode) ([]Result, error) {
	lanes := make([]*latencyLane, 0, len(modes))
	defer func() {
		for _, l := range lanes {
			l.e.close()
		}
	}()
	for _, m := range modes {
		l, err := r.startLane(ctx, m)
		if err != nil {
			return nil, err
		}
		lanes = append(lanes, l)
	}
	time.Sleep(100 * time.Millisecond) // the consumers subscribe

	laneOf := func(at time.Duration) int { return turn(at, r.o.LatencySlice, len(lanes)) }
	n := int(float64(rate)*r.o.LatencyFor.Seconds()) * len(lanes)
	sched := schedule(n, rate, r.o.LatencyPoisson)
	payload := make([]byte, payloadSize)
	warmN := int(float64(rate) * r.o.LatencyWarmup.Seconds())
	jobs := make(chan latencyJob, n+warmN*len(lanes))
	var wg sync.WaitGroup
	var werr atomic.Value
	for w := range latencyWriters {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for j := range jobs {
				l := j.lane
				sched := strconv.FormatInt(j.at.UnixNano(), 10)
				if j.warm {
					sched = warmSched
				}
				err := pgx.BeginFunc(ctx, l.e.pool, func(tx pgx.Tx) error {
					return l.write(ctx, tx, strconv.Itoa(rng.IntN(keyCount)), payload, sched)
				})
				if err != nil {
					werr.CompareAndSwap(nil, err)
					continue
				}
				if j.warm {
					continue
				}
				now := time.Now()
				l.mu.Lock()
				l.commits = append(l.commits, now.Sub(j.at))
				l.committed[j.at.UnixNano()] = now
				l.mu.Unlock()
			}
		})
	}
	r.warmUp(lanes, rate, warmN, jobs)
	// PostgreSQL's CPU goes to the lane whose slice it was spent in.
	pgAt := cputime.Proc("postgres")
	charge := func(l *latencyLane) {
		now := cputime.Proc("postgres")
		l.pg += now - pgAt
		pgAt = now
	}
	start := time.Now().Add(10 * time.Millisecond)
	cur := 0
	for _, at := range sched {
		if i := laneOf(at); i != cur {
			charge(lanes[cur])
			cur = i
		}
		t := start.Add(at)
		if d := time.Until(t); d > 0 {
			time.Sleep(d)
		}
		lanes[cur].sent++
		jobs <- latencyJob{at: t, lane: lanes[cur]}
	}
	close(jobs)
	wg.Wait()
	written := time.Since(start)
	if v := werr.Load(); v != nil {
		return nil, v.(error)
	}
	// Wait for the rest while deliveries progress (an overloaded cell may
	// take long after the last commit), at most 3 minutes.
	var poll time.Duration
	for _, m := range modes {
		poll = max(poll, m.poll)
	}
	received := func() (got int64) {
		for _, l := range lanes {
			got += l.received.Load()
		}
		return got
	}
	awaitProgress(received, int64(n), 15*time.Second+2*poll)
	charge(lanes[cur])

	out := make([]Result, 0, len(lanes))
	for _, l := range lanes {
		res, err := r.laneResult(l, rate, len(lanes), written)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.m.name, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// warmUp sends each lane warmN events at rate, one lane after the other,
// through jobs, and waits for them to arrive (while they progress; a
// relay that cannot deliver them fails the cell later). Then it records
// each lane's counters, which laneResult leaves out.
func (r *runner) warmUp(lanes []*latencyLane, rate, warmN int, jobs chan<- latencyJob) {
	if warmN <= 0 {
		return
	}
	start := time.Now()
	for i, l := range lanes {
		for k := range warmN {
			t := start.Add(time.Duration(i*warmN+k) * time.Second / time.Duration(rate))
			if d := time.Until(t); d > 0 {
				time.Sleep(d)
			}
			jobs <- latencyJob{at: t, lane: l, warm: true}
		}
	}
	warmed := func() (got int64) {
		for _, l := range lanes {
			got += min(l.warmed.Load(), int64(warmN))
		}
		return got
	}
	awaitProgress(warmed, int64(warmN*len(lanes)), 15*time.Second)
	for _, l := range lanes {
		l.warm = Result{Metrics: map[string]float64{}}
		if l.stats != nil {
			l.stats(&l.warm)
		}
	}
}

// awaitProgress waits until got reaches want, while it progresses: it
// gives up when got has not moved for stall, or after 3 minutes (an
// overloaded cell may take long after its last commit).
func awaitProgress(got func() int64, want int64, stall time.Duration) {
	last, lastAt, end := got(), time.Now(), time.Now().Add(3*time.Minute)
	for got() < want && time.Now().Before(end) && time.Since(lastAt) < stall {
		time.Sleep(10 * time.Millisecond) // polling the consumers' counts
		if v := got(); v != last {
			last, lastAt = v, time.Now()
		}
	}
}

// laneResult is a lane's measurements as a Result; shared is how many
// modes took turns in its cell, written how long the writers took.
func (r *runner) laneResult(l *latencyLane, rate, shared int, written time.Duration) (Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.mu.Lock()
	defer l.st.mu.Unlock()
	n, lat := l.sent, l.st.received
	ca, early := between(l.committed, l.st.ackedAt)
	cs, _ := between(l.committed, l.st.sentAt)
	sa, _ := between(l.st.sentAt, l.st.ackedAt)
	params := map[string]any{"rate": rate, "poisson": r.o.LatencyPoisson, "reference": l.m.hand, "listen": l.m.listen,
		"poll_ms": l.m.poll.Milliseconds(), "seconds": r.o.LatencyFor.Seconds(), "warmup_seconds": r.o.LatencyWarmup.Seconds(), "n": n, "writers": latencyWriters}
	if shared > 1 {
		params["slice_ms"] = r.o.LatencySlice.Milliseconds()
		params["shared_with"] = shared - 1
	}
	res := Result{Workload: "latency", Params: params,
		Metrics: map[string]float64{"p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "p999_ms": pct(lat, 99.9), "max_ms": pct(lat, 100),
			"commit_p50_ms": pct(l.commits, 50), "commit_p99_ms": pct(l.commits, 99),
			"send_p50_ms": pct(l.st.sent, 50), "send_p99_ms": pct(l.st.sent, 99), "ack_p50_ms": pct(l.st.acked, 50), "ack_p99_ms": pct(l.st.acked, 99),
			"commit_ack_p50_ms": pct(ca, 50), "commit_ack_p99_ms": pct(ca, 99), "acked_before_commit": float64(early),
			"commit_send_p50_ms": pct(cs, 50), "commit_send_p99_ms": pct(cs, 99), "send_ack_p50_ms": pct(sa, 50), "send_ack_p99_ms": pct(sa, 99),
			"committed_per_s": float64(len(l.commits)) * float64(shared) / written.Seconds(), "received": float64(len(lat)), "sent": float64(n)}}
	if l.pg > 0 && n > 0 {
		res.Metrics["pg_cpu_us"] = float64(l.pg) / float64(time.Microsecond) / float64(n)
	}
	if l.stats != nil {
		l.stats(&res)
		for k, v := range l.warm.Metrics {
			res.Metrics[k] -= v
		}
		if c, ok := res.Metrics["relay_claims"]; ok && n > 0 {
			res.Metrics["claims_per_ev"] = c / float64(n)
		}
	}
	if len(lat) < n {
		res.Note = fmt.Sprintf("received %d of %d events before deliveries stopped progressing; percentiles cover those received", len(lat), n)
		r.logf("  %s: %s", l.m.name, res.Note)
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
func startLatencyRelay(ctx context.Context, e *env, m latencyMode, st *stages) (*relay.Relay, error) {
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
	rl, err := relay.New(s, stagedPublisher{pub, st}, &relay.Config{DisableListen: !m.listen, PollInterval: m.poll})
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
