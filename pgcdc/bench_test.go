package pgcdc_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/pgcdc"
	"github.com/outboxgo/outbox/relay"
)

// The benchmarks' sizes: a flag, or the environment, with defaults small
// enough for CI (which runs every benchmark once). The figures
// are for -bench-events 1000000.
var (
	benchEvents        = flag.Int("bench-events", envInt("OUTBOX_BENCH_EVENTS", 10000), "BenchmarkDrain: events in the burst (env OUTBOX_BENCH_EVENTS)")
	benchLatencyEvents = flag.Int("bench-latency-events", envInt("OUTBOX_BENCH_LATENCY_EVENTS", 3000), "BenchmarkLatency: events committed at -bench-rate (env OUTBOX_BENCH_LATENCY_EVENTS)")
	benchStorage       = flag.String("bench-storage", "file", "BenchmarkDrain: the JetStream stream's storage, file or memory")
	benchRate          = flag.Int("bench-rate", envInt("OUTBOX_BENCH_RATE", 1000), "BenchmarkLatency: events per second, one per transaction (env OUTBOX_BENCH_RATE)")
	benchCases         = flag.String("bench-cases", "cdc,cdc-atomic,cdc-fast,poll-unordered,poll-ordered", "BenchmarkDrain: the cases, in the order they run")
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkDrain measures, in one run, how fast the CDC relay (with the
// NATS publisher's defaults; with AtomicKeyRuns: a key's run in flight as
// one atomic batch; and with FastKeyRuns: a call's events in flight as one
// fast-ingest batch) and the polling relay (unordered, and ordered: one
// event of a key in flight) drain a burst of events committed before they
// start, over 1,000 keys and over 10, to an in-process JetStream: from
// Start until the broker holds them all. Each reports the CPU per event of
// this process (the relay and the JetStream server) and of PostgreSQL, and
// what a system call costs the machine (cputime.Syscall). Each case has a schema and a stream of its own in the
// package's private cluster; -bench-storage memory makes every case's
// stream a memory one (where JetStream stages an atomic batch in memory,
// not in a file store of its own). -bench-cases picks the cases. Run it
// once per case:
//
//	go test -run '^$' -bench Drain -benchtime 1x ./pgcdc -args -bench-events 100000
func BenchmarkDrain(b *testing.B) {
	n := *benchEvents
	for _, keys := range []int{1000, 10} {
		for _, how := range strings.Split(*benchCases, ",") {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, how), func(b *testing.B) {
				var total time.Duration
				var cpu drainCPU
				for range b.N {
					d, c := drainOnce(b, how, n, keys)
					total += d
					cpu.proc += c.proc
					cpu.pg += c.pg
				}
				us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n*b.N) }
				b.ReportMetric(float64(n*b.N)/total.Seconds(), "ev/s")
				b.ReportMetric(us(cpu.proc), "proc-cpu-µs/ev")
				if cpu.pg > 0 {
					b.ReportMetric(us(cpu.pg), "pg-cpu-µs/ev")
				}
				// The walsender makes a system call per WAL record (see
				// cputime.Syscall): what one costs here, beside the ratio.
				b.ReportMetric(float64(cputime.Syscall().Nanoseconds()), "syscall-ns")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// drainCPU is the CPU time a drain cost: this process's (the relay's, and
// the in-process JetStream server's) and PostgreSQL's (every postgres
// process of this machine; the package's cluster is the only busy one).
type drainCPU struct{ proc, pg time.Duration }

// drainOnce returns how long the drain took and the CPU it cost.
func drainOnce(b *testing.B, how string, n, keys int) (time.Duration, drainCPU) {
	b.StopTimer()
	e := newEnv(b)
	ctx := context.Background()
	switch *benchStorage {
	case "file":
	case "memory":
		e.restream(func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage })
	default:
		b.Fatalf("-bench-storage %q: want file or memory", *benchStorage)
	}
	pub := e.publisher()
	switch how {
	case "cdc", "poll-unordered", "poll-ordered":
	case "cdc-atomic":
		pub = e.atomicPublisher()
	case "cdc-fast":
		pub = e.fastPublisher()
	default:
		b.Fatalf("-bench-cases: unknown case %q", how)
	}
	cdc := strings.HasPrefix(how, "cdc")
	if cdc {
		// Create the slot, then commit the burst while no relay runs.
		r := e.start(quiet(e.config()), pub)
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := r.Stop(sctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	const perTx = 1000
	for i := 0; i < n; i += perTx {
		msgs := make([]outbox.Message, 0, perTx)
		for j := i; j < min(n, i+perTx); j++ {
			m := msg(fmt.Sprintf("k%d", j%keys))
			m.Payload = make([]byte, 200)
			msgs = append(msgs, m)
		}
		e.insert(false, msgs...)
	}
	stream, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start, proc, pg := time.Now(), cputime.Self(), cputime.Proc("postgres")
	if cdc {
		e.start(quiet(e.config()), pub)
	} else {
		e.startPolling(how == "poll-unordered")
	}
	e.waitFor("the burst published", 10*time.Minute, func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs >= uint64(n)
	})
	d, c := time.Since(start), drainCPU{proc: cputime.Self() - proc, pg: cputime.Proc("postgres") - pg}
	b.StopTimer()
	return d, c
}

// fastPublisher is a nats publisher to the test's stream, with
// FastKeyRuns: the stream is made to allow batch publish, and the
// publisher is checked to keep key order.
func (e *env) fastPublisher() *outboxnats.Publisher {
	e.t.Helper()
	e.restream(func(c *jetstream.StreamConfig) { c.AllowBatchPublish = true })
	p, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: e.nats.URL(), SubjectPrefix: e.prefix,
		ReconnectWait: 50 * time.Millisecond, AckTimeout: 5 * time.Second, FastKeyRuns: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	if !p.KeepsKeyOrder() {
		e.t.Fatal("the FastKeyRuns publisher does not keep key order")
	}
	return p
}

// quiet drops cfg's logger: a benchmark's log is no place for the
// relay's debug lines.
func quiet(cfg *pgcdc.Config) *pgcdc.Config {
	cfg.Logger = nil
	return cfg
}

// startPolling starts the polling relay (package relay) on the env's
// outbox, with its defaults; it is stopped at cleanup.
func (e *env) startPolling(unordered bool) {
	e.t.Helper()
	r, err := relay.New(e.db.Store(), e.publisher(), &relay.Config{Unordered: unordered})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
}

// BenchmarkLatency measures the CDC relay's commit → ack latency: writers
// commit one event per transaction at -bench-rate events per second (over
// 100 keys) while the relay streams, and each event's latency is the time
// from its commit's return to the broker's acknowledgement reaching the
// relay (its AfterPublish hook). It reports the p50 and p99 in ms and the
// rate achieved.
//
//	go test -run '^$' -bench Latency -benchtime 1x ./pgcdc
func BenchmarkLatency(b *testing.B) {
	for range b.N {
		latencyOnce(b, *benchLatencyEvents, *benchRate)
	}
}

func latencyOnce(b *testing.B, n, rate int) {
	b.StopTimer()
	e := newEnv(b)
	var (
		mu      sync.Mutex
		ackedAt = map[string]time.Time{}
	)
	cfg := quiet(e.config())
	cfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) {
		now := time.Now()
		mu.Lock()
		for i, m := range msgs {
			if errs[i] == nil {
				if _, seen := ackedAt[m.ID.String()]; !seen {
					ackedAt[m.ID.String()] = now
				}
			}
		}
		mu.Unlock()
	}
	e.start(cfg, e.publisher())
	commits := make(map[string]time.Time, n)
	b.StartTimer()
	begin := time.Now()
	// Open loop: event i is due at begin + i/rate; 4 writers take them in
	// turn, so that a slow commit does not hold the schedule back.
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				m := msg(fmt.Sprintf("k%d", i%100))
				e.insert(false, m)
				at := time.Now()
				mu.Lock()
				commits[m.ID.String()] = at
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if d := time.Until(begin.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d) // the schedule of an open-loop load
		}
		next <- i
	}
	close(next)
	wg.Wait()
	wrote := time.Since(begin)
	e.waitFor("every event acknowledged", 5*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ackedAt) >= n
	})
	b.StopTimer()
	mu.Lock()
	lat := make([]time.Duration, 0, n)
	for id, c := range commits {
		// An ack may come before the commit's return reaches the writer
		// (the log carries the commit first): that latency counts as 0.
		lat = append(lat, max(0, ackedAt[id].Sub(c)))
	}
	mu.Unlock()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(float64(n)/wrote.Seconds(), "ev/s")
	b.ReportMetric(0, "ns/op")
}
