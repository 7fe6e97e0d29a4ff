package nats_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
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

// BenchmarkPublishOne publishes one message per call and waits for its
// acknowledgement before the next, as the relay does for a key with one
// event in flight, beside JetStream's own synchronous publish on the same
// server: the publisher's cost per call. It reports messages per second
// and this process's CPU per message.
func BenchmarkPublishOne(b *testing.B) {
	nc := natstest.Connect(b)
	prefix, _ := natstest.NewStream(b, nc)
	payload := bytes.Repeat([]byte("x"), 200)
	ctx := context.Background()
	report := func(b *testing.B, start time.Time, cpu time.Duration) {
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		b.ReportMetric(float64((cputime.Self()-cpu).Microseconds())/float64(b.N), "cpu-µs/msg")
	}
	b.Run("publisher", func(b *testing.B) {
		pub := newPublisher(b, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
		b.Cleanup(func() { _ = pub.Close() })
		msgs := make([]outbox.Message, 1)
		start, cpu := time.Now(), cputime.Self()
		for b.Loop() {
			msgs[0] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Key: "k", Payload: payload, CreatedAt: start}
			if err := pub.Publish(ctx, msgs)[0]; err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, cpu)
	})
	b.Run("jetstream", func(b *testing.B) {
		js, err := jetstream.New(nc)
		if err != nil {
			b.Fatal(err)
		}
		start, cpu := time.Now(), cputime.Self()
		for b.Loop() {
			m := &nats.Msg{Subject: prefix + ".bench", Data: payload, Header: nats.Header{jetstream.MsgIDHeader: []string{outbox.NewID().String()}}}
			if _, err := js.PublishMsg(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
		report(b, start, cpu)
	})
}
