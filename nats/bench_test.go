package nats_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
)

// BenchmarkPublish publishes batches of 1,000 messages of 200 bytes to a
// stream of its own on the shared NATS, as a relay would, and reports
// messages per second.
func BenchmarkPublish(b *testing.B) {
	const batch = 1000
	nc := natstest.Connect(b)
	prefix, _ := natstest.NewStream(b, nc)
	pub := newPublisher(b, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
	b.Cleanup(func() { _ = pub.Close() })
	payload := bytes.Repeat([]byte("x"), 200)
	msgs := make([]outbox.Message, batch)
	ctx := context.Background()
	start := time.Now()
	n := 0
	for b.Loop() {
		for i := range msgs {
			msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Key: "k", Payload: payload, CreatedAt: start}
		}
		for i, err := range pub.Publish(ctx, msgs) {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		n += batch
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}
