package relay_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/cputime"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrainNATSFast drains a backlog of b.N events (200-byte payloads
// over 1, 10 and 1,000 keys) from PostgreSQL to an in-process nats-server
// whose R1 file stream allows batch publish, side by side in one run, one
// relay with the default config: ordered with the plain publisher (one
// event of a key in flight at a time), ordered with
// PublisherConfig.FastKeyRuns (the publisher keeps key order, so the
// relay sends a batch's events in one call, as fast-ingest batches), and
// unordered. Each reports events/s and the µs of CPU per event of this
// process (the relay and the in-process nats-server) and of PostgreSQL.
// -nats-fast-rounds interleaves rounds of the cases.
//
//	go test -run '^$' -bench DrainNATSFast -benchtime 20000x ./relay/ -nats-fast-rounds 3
func BenchmarkDrainNATSFast(b *testing.B) {
	srv := natstest.StartServer(b, "")
	modes := strings.Split(*natsFastModes, ",")
	for range *natsFastRounds {
		for _, keys := range []int{1, 10, 1000} {
			for _, mode := range modes {
				b.Run(fmt.Sprintf("keys=%d/%s", keys, mode), func(b *testing.B) {
					drainFast(b, srv, keys, mode)
				})
			}
		}
	}
}

// natsFastRounds is how many times BenchmarkDrainNATSFast runs its cases,
// interleaved (-count repeats each case before the next one).
var natsFastRounds = flag.Int("nats-fast-rounds", 1, "rounds of BenchmarkDrainNATSFast's cases")

// natsFastModes are BenchmarkDrainNATSFast's cases, in the order they run.
var natsFastModes = flag.String("nats-fast-modes", "ordered,ordered-fast,unordered", "BenchmarkDrainNATSFast's cases: ordered, ordered-fast, unordered")

// drainFast writes b.N events over keys keys, then times one relay
// (default config, ordered unless mode says so) draining them into an R1
// file stream of its own on srv that allows batch publish.
func drainFast(b *testing.B, srv *natstest.Server, keys int, mode string) {
	bd := setup(b)
	ctx := context.Background()
	nc := srv.Connect(b)
	prefix := fmt.Sprintf("fast%d", time.Now().UnixNano())
	if _, err := natstest.JetStream(b, nc).CreateStream(ctx, jetstream.StreamConfig{
		Name: prefix, Subjects: []string{prefix + ".>"}, Duplicates: natspub.DuplicateWindow,
		Storage: jetstream.FileStorage, AllowBatchPublish: true,
	}); err != nil {
		b.Fatal(err)
	}
	switch mode {
	case "ordered", "ordered-fast", "unordered":
	default:
		b.Fatalf("-nats-fast-modes: unknown case %q", mode)
	}
	fast := mode == "ordered-fast"
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: srv.URL(), SubjectPrefix: prefix, Stream: prefix, FastKeyRuns: fast, NoKeyRuns: !fast})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	if got := pub.KeepsKeyOrder(); got != fast {
		b.Fatalf("KeepsKeyOrder = %v, want %v", got, fast)
	}
	n := b.N
	seed(b, bd, n, keys)
	r, err := relay.New(bd.store, pub, &relay.Config{Unordered: mode == "unordered", PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	var proc, pg time.Duration
	timeDrainFrom(b, r, n, func() { proc, pg = cputime.Self(), cputime.Proc("postgres") }, func(elapsed time.Duration) {
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		b.ReportMetric(us(cputime.Self()-proc), "proc_cpu_us")
		if p := cputime.Proc("postgres"); p > 0 {
			b.ReportMetric(us(p-pg), "pg_cpu_us")
		}
		b.ReportMetric(0, "ns/op")
	})
}

// timeDrainFrom is timeDrain with begin called as the timer starts.
func timeDrainFrom(b *testing.B, r *relay.Relay, n int, begin func(), report func(elapsed time.Duration)) {
	b.Helper()
	begin()
	timeDrain(b, r, n, report)
}
