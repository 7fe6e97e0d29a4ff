package relay_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrain measures how fast a backlog of b.N events (200-byte
// payloads, 1,000 keys) drains from PostgreSQL to JetStream with acks,
// unordered. The backlog is written before the timer starts. For the figure
// in the docs:
//
//	go test -run '^$' -bench Drain -benchtime 200000x ./relay/
func BenchmarkDrain(b *testing.B) {
	for _, bs := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", bs), func(b *testing.B) {
			benchDrain(b, 1, 0, nil, &relay.Config{BatchSize: bs, Unordered: true})
		})
	}
}

// BenchmarkScale compares ordered and unordered draining with 1, 2 and 4
// relays (each with its own pool and broker connection), with and without
// a 2ms delay per publish call: with the delay the broker, not the 2-core
// CPU, is the limit, and scale-out shows.
//
//	go test -run '^$' -bench Scale -benchtime 20000x ./relay/
func BenchmarkScale(b *testing.B) {
	for _, delay := range []time.Duration{0, 2 * time.Millisecond} {
		for _, mode := range []string{"unordered", "ordered"} {
			for _, relays := range []int{1, 2, 4} {
				b.Run(fmt.Sprintf("delay=%v/%s/relays=%d", delay, mode, relays), func(b *testing.B) {
					benchDrain(b, relays, delay, nil, &relay.Config{BatchSize: 500, Unordered: mode == "unordered"})
				})
			}
		}
	}
}

// BenchmarkScaleSlowBroker shows scale-out when the broker is the limit:
// each acknowledgement takes 1ms, one after the other, so one relay worker
// moves at most about 1,000 events/s whatever the CPU. Batches of 100 and
// 1,000 keys, so 4 relays × 2 workers keep at most 800 keys in flight.
//
//	go test -run '^$' -bench ScaleSlowBroker -benchtime 20000x ./relay/
func BenchmarkScaleSlowBroker(b *testing.B) {
	for _, mode := range []string{"unordered", "ordered"} {
		for _, relays := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("%s/relays=%d", mode, relays), func(b *testing.B) {
				slow := func(b *testing.B, bd *bundle) publishers.Publisher {
					return perAckPublisher{Publisher: bd.publisher(b), delay: time.Millisecond}
				}
				benchDrain(b, relays, 0, slow, &relay.Config{BatchSize: 100, Unordered: mode == "unordered"})
			})
		}
	}
}

// seed writes n events (200-byte payloads over keys keys, topic "bench",
// 5,000 per transaction) and vacuums the table, so that its statistics
// are those of the backlog.
func seed(b *testing.B, bd *bundle, n, keys int) {
	b.Helper()
	ctx := context.Background()
	payload := make([]byte, 200)
	const chunk = 5000
	for i := 0; i < n; i += chunk {
		msgs := make([]outbox.Message, 0, chunk)
		for j := i; j < min(n, i+chunk); j++ {
			msgs = append(msgs, outbox.Message{Topic: "bench", Key: fmt.Sprint(j % keys), Type: "Bench", Payload: payload})
		}
		if err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error { return bd.ob.Enqueue(ctx, tx, msgs...) }); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := bd.pool.Exec(ctx, `VACUUM ANALYZE "`+bd.cfg.Schema+`".messages`); err != nil {
		b.Fatal(err)
	}
}

// timeDrain starts r, waits until it has published n events and stops it,
// timing the drain alone. report gets the drain's duration before the
// relay stops; nil reports events/s.
func timeDrain(b *testing.B, r *relay.Relay, n int, report func(elapsed time.Duration)) {
	b.Helper()
	if report == nil {
		report = func(elapsed time.Duration) { b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s") }
	}
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for r.Stats().Published < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("drained %d of %d in 10 minutes", r.Stats().Published, n)
		}
		time.Sleep(time.Millisecond) // polling a counter
	}
	elapsed := time.Since(start)
	b.StopTimer()
	report(elapsed)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Stop(sctx); err != nil {
		b.Fatal(err)
	}
}

// benchDrain writes b.N events over 1,000 keys, then times relays
// draining them. newPub makes each relay's publisher; nil means JetStream.
func benchDrain(b *testing.B, relays int, delay time.Duration, newPub func(*testing.B, *bundle) publishers.Publisher, cfg *relay.Config) {
	benchDrainKeys(b, 1000, relays, delay, newPub, cfg)
}

// benchDrainKeys is benchDrain over keys keys.
func benchDrainKeys(b *testing.B, keys, relays int, delay time.Duration, newPub func(*testing.B, *bundle) publishers.Publisher, cfg *relay.Config) {
	bd := setup(b)
	ctx := context.Background()
	n := b.N
	seed(b, bd, n, keys)
	if newPub == nil {
		newPub = func(b *testing.B, bd *bundle) publishers.Publisher { return bd.publisher(b) }
	}
	cfg.PollInterval = 10 * time.Millisecond
	var parts batchParts
	cfg.Hooks.AfterComplete = parts.add
	defer parts.report(b)
	var rs []*relay.Relay
	for range relays {
		pub := newPub(b, bd)
		if delay > 0 {
			pub = slowPublisher{Publisher: pub, delay: delay}
		}
		db, _ := postgres.New(pgtest.Pool(b), bd.cfg)
		r, err := relay.New(db.Store(), pub, cfg)
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, r)
	}
	published := func() (n int64) {
		for _, r := range rs {
			n += r.Stats().Published
		}
		return n
	}
	done := make(chan struct{})
	b.ResetTimer()
	start := time.Now()
	for _, r := range rs {
		if err := r.Start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var peakHeap uint64
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for i := 0; published() < int64(n); i++ {
			if i%50 == 0 {
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapInuse)
			}
			time.Sleep(time.Millisecond) // polling a counter
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("drained %d of %d in 10 minutes", published(), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, r := range rs {
		if err := r.Stop(sctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
}

// batchParts sums where the batches of a drain spent their time
// (relay.BatchResult), for the benchmark to report per batch.
type batchParts struct {
	mu                        sync.Mutex
	batches, events           int
	claim, publish, completed time.Duration
}

func (p *batchParts) add(res relay.BatchResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches++
	p.events += res.Claimed
	p.claim += res.ClaimElapsed
	p.publish += res.PublishElapsed
	p.completed += res.CompleteElapsed
}

// report reports the batches' mean size and the mean time of each part.
func (p *batchParts) report(b *testing.B) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batches == 0 {
		return
	}
	n := float64(p.batches)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / n }
	b.ReportMetric(float64(p.events)/n, "events/batch")
	b.ReportMetric(ms(p.claim), "claim-ms/batch")
	b.ReportMetric(ms(p.publish), "publish-ms/batch")
	b.ReportMetric(ms(p.completed), "complete-ms/batch")
}

// parseKeyCounts reads a benchmark flag's comma-separated key counts.
func parseKeyCounts(b *testing.B, name, value string) []int {
	var counts []int
	for _, f := range strings.Split(value, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			b.Fatalf("-%s %q: %q is not a positive number", name, value, f)
		}
		counts = append(counts, k)
	}
	return counts
}
