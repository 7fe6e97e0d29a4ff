package relay_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrain measures how fast a backlog of b.N events (200-byte
// payloads, 1,000 keys) drains from PostgreSQL to JetStream with acks. The
// backlog is written before the timer starts. For the figure in the docs:
//
//	go test -run '^$' -bench Drain -benchtime 200000x ./relay/
func BenchmarkDrain(b *testing.B) {
	for _, bs := range []int{100, 500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", bs), func(b *testing.B) {
			benchDrain(b, &relay.Config{BatchSize: bs})
		})
	}
}

func benchDrain(b *testing.B, cfg *relay.Config) {
	bd := setup(b)
	ctx := context.Background()
	payload := make([]byte, 200)
	n := b.N
	const chunk = 5000
	for i := 0; i < n; i += chunk {
		msgs := make([]outbox.Message, 0, chunk)
		for j := i; j < min(n, i+chunk); j++ {
			msgs = append(msgs, outbox.Message{Topic: "bench", Key: fmt.Sprint(j % 1000), Type: "Bench", Payload: payload})
		}
		if err := pgx.BeginFunc(ctx, bd.pool, func(tx pgx.Tx) error { return bd.ob.Enqueue(ctx, tx, msgs...) }); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := bd.pool.Exec(ctx, `VACUUM ANALYZE "`+bd.cfg.Schema+`".messages`); err != nil {
		b.Fatal(err)
	}
	pub := bd.publisher(b)
	done := make(chan struct{})
	cfg.PollInterval = 10 * time.Millisecond
	r, err := relay.New(bd.store, pub, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var peakHeap uint64
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for i := 0; r.Stats().Published < int64(n); i++ {
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
		b.Fatalf("drained %d of %d in 10 minutes", r.Stats().Published, n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := r.Stop(sctx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
}
