package pubsub_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/pubsub"
)

// benchBatch is the relay's batch size.
const benchBatch = 1000

// BenchmarkPublish publishes batches of 1,000 messages of 200 bytes (no
// key) to a topic of its own on the emulator, as a relay would, and
// reports messages per second.
func BenchmarkPublish(b *testing.B) {
	w := newWorld(b)
	w.createTopic(b, "bench")
	pub := newPublisher(b, pubsub.PublisherConfig{Project: w.project, TopicPrefix: w.prefix})
	b.Cleanup(func() { _ = pub.Close() })
	payload := bytes.Repeat([]byte("x"), 200)
	msgs := make([]outbox.Message, benchBatch)
	ctx := context.Background()
	start := time.Now()
	n := 0
	for b.Loop() {
		for i := range msgs {
			msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Payload: payload, CreatedAt: start}
		}
		for i, err := range pub.Publish(ctx, msgs) {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		n += benchBatch
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkRawClient is the baseline: Google's client with its default
// settings publishing 1,000 messages of 200 bytes asynchronously, then
// awaiting every result, per iteration, to a topic of its own.
func BenchmarkRawClient(b *testing.B) {
	w := newWorld(b)
	name := w.createTopic(b, "raw")
	tp := w.client.Publisher(name)
	b.Cleanup(tp.Stop)
	payload := bytes.Repeat([]byte("x"), 200)
	ctx := context.Background()
	results := make([]*gpubsub.PublishResult, benchBatch)
	start := time.Now()
	n := 0
	for b.Loop() {
		for i := range results {
			// The attributes the Publisher sets for such a message.
			results[i] = tp.Publish(ctx, &gpubsub.Message{Data: payload, Attributes: map[string]string{
				pubsub.AttrID: outbox.NewID().String(), pubsub.AttrTopic: "raw",
				pubsub.AttrCreatedAt: start.UTC().Format(time.RFC3339Nano)}})
		}
		for i, r := range results {
			if _, err := r.Get(ctx); err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		n += benchBatch
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}
