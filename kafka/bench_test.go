package kafka_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/kafka"
)

// BenchmarkPublish publishes batches of 1,000 messages of 200 bytes to a
// topic of its own (on kfake, or the real Kafka of
// OUTBOX_TEST_KAFKA_BROKERS), as a relay would, and reports messages per
// second.
func BenchmarkPublish(b *testing.B) {
	const batch = 1000
	brk := brokers(b)
	prefix := newTopicName(b) + "."
	createTopic(b, brk, prefix+"bench")
	pub := newPublisher(b, &kafka.PublisherConfig{Brokers: brk, TopicPrefix: prefix})
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
