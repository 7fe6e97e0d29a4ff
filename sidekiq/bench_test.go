package sidekiq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sidekiq"
)

// BenchmarkPublish pushes batches of 1,000 messages with 200-byte JSON
// payloads to a namespace of its own on the shared Redis, as a relay
// would (the Publisher), interleaved batch by batch with the same number
// of jobs of the same size pushed by a raw go-redis pipeline of one LPUSH
// per job: the floor the publisher is measured against, under the same
// load. It reports both rates in jobs per second, and their ratio.
func BenchmarkPublish(b *testing.B) {
	const batch = 1000
	payload := []byte(`{"data":"` + strings.Repeat("x", 190) + `"}`)
	rdb := connect(b)
	ns := newNamespace(b, rdb)
	pub := newPublisher(b, sidekiq.PublisherConfig{URL: redisURL(), Namespace: ns, Class: "BenchJob", Queue: "bench"})
	b.Cleanup(func() { _ = pub.Close() })
	// A job of the publisher's size, made once, for the raw pipeline.
	job := `{"class":"BenchJob","args":[` + string(payload) + `,{"id":"01936b2e-1f6a-7cc2-9d4e-5f8a0b1c2d3e","topic":"bench","key":"k","type":"","headers":{},"encoding":"json"}],"queue":"bench","jid":"d45f8fa0695027b6415827cc","retry":true,"created_at":1764590400.25,"enqueued_at":1764590400.25}`
	msgs := make([]outbox.Message, batch)
	ctx := context.Background()
	var pubTime, rawTime time.Duration
	n := 0
	for b.Loop() {
		for i := range msgs {
			msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Key: "k", Payload: payload, CreatedAt: time.Now()}
		}
		start := time.Now()
		for i, err := range pub.Publish(ctx, msgs) {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		pubTime += time.Since(start)

		start = time.Now()
		pipe := rdb.Pipeline()
		for range batch {
			pipe.LPush(ctx, ns+":queue:raw", job)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		rawTime += time.Since(start)

		n += batch
		if n%100_000 == 0 {
			b.StopTimer()
			_ = rdb.Del(ctx, ns+":queue:bench", ns+":queue:raw").Err()
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(n)/pubTime.Seconds(), "publisher-jobs/s")
	b.ReportMetric(float64(n)/rawTime.Seconds(), "raw-lpush-jobs/s")
	b.ReportMetric(pubTime.Seconds()/rawTime.Seconds(), "publisher/raw-time")
}
