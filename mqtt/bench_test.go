package mqtt_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/mqtt"
)

// benchBatch and benchPayload shape the benchmarks' batches, as a relay
// would publish them: 1,000 messages of 200 bytes.
const (
	benchBatch   = 1000
	benchPayload = 200
)

// BenchmarkPublish publishes batches to a topic of its own on the shared
// broker with the Publisher, and reports messages per second.
func BenchmarkPublish(b *testing.B) {
	testenv.RequireTCP(b, brokerName, brokerAddr())
	pub := newPublisher(b, mqtt.PublisherConfig{URL: "mqtt://" + brokerAddr(), TopicPrefix: newPrefix()})
	b.Cleanup(func() { _ = pub.Close() })
	payload := bytes.Repeat([]byte("x"), benchPayload)
	msgs := make([]outbox.Message, benchBatch)
	ctx := context.Background()
	start := time.Now()
	n := 0
	for b.Loop() {
		for i := range msgs {
			msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Key: "k", Type: "T", Payload: payload,
				Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, CreatedAt: start}
		}
		for i, err := range pub.Publish(ctx, msgs) {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		n += len(msgs)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkRawPaho is the baseline: the same batches with the plain paho
// client at QoS 1, every message of a batch in flight at once (one
// goroutine each, as paho's blocking Publish wants), the same user
// properties, no outbox code.
func BenchmarkRawPaho(b *testing.B) {
	testenv.RequireTCP(b, brokerName, brokerAddr())
	nc, err := net.Dial("tcp", brokerAddr())
	if err != nil {
		b.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc})
	ctx := context.Background()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("outbox-bench-%d", os.Getpid()), CleanStart: true, KeepAlive: 30}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}); <-c.Done() })
	topic := newPrefix() + "bench"
	payload := bytes.Repeat([]byte("x"), benchPayload)
	start := time.Now()
	n := 0
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make([]error, benchBatch)
		for i := range benchBatch {
			props := paho.UserProperties{{Key: "outbox-id", Value: outbox.NewID().String()}, {Key: "outbox-key", Value: "k"},
				{Key: "outbox-type", Value: "T"}, {Key: "outbox-created-at", Value: start.Format(time.RFC3339Nano)},
				{Key: "traceparent", Value: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
			wg.Go(func() {
				_, errs[i] = c.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: payload, Properties: &paho.PublishProperties{User: props}})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
		n += benchBatch
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
}
