package relay_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	pubsubpub "github.com/outboxgo/outbox/pubsub"
	"github.com/outboxgo/outbox/relay"
)

// pubsubKeys are BenchmarkDrainPubSub's key counts.
var pubsubKeys = flag.String("pubsub-keys", "1000", "BenchmarkDrainPubSub's key counts, comma-separated")

// BenchmarkDrainPubSub drains a backlog of b.N events from PostgreSQL to
// Google's Pub/Sub emulator, unordered and ordered (ordering keys on), over
// each of -pubsub-keys keys, beside Google's own client publishing as many
// messages asynchronously in batches of 1,000, in the same run.
//
//	go test -run '^$' -bench DrainPubSub -benchtime 20000x ./relay/ -pubsub-keys 1,10,1000
func BenchmarkDrainPubSub(b *testing.B) {
	keyCounts := parseKeyCounts(b, "pubsub-keys", *pubsubKeys)
	host := os.Getenv("PUBSUB_EMULATOR_HOST")
	if host == "" {
		host = "127.0.0.1:8085"
		b.Setenv("PUBSUB_EMULATOR_HOST", host)
	}
	testenv.RequireTCP(b, "the Pub/Sub emulator", host)
	project := fmt.Sprintf("outbox-bench-%d", time.Now().UnixNano())
	client, err := gpubsub.NewClient(context.Background(), project)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	topic := func(b *testing.B, prefix string) string {
		name := fmt.Sprintf("projects/%s/topics/%sbench", project, prefix)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := client.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: name}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.TopicAdminClient.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: name})
		})
		return name
	}
	for _, keys := range keyCounts {
		for _, mode := range []string{"unordered", "ordered"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, mode), func(b *testing.B) {
				drainPubSub(b, project, keys, mode == "unordered", topic)
			})
		}
	}
	b.Run("raw client", func(b *testing.B) {
		tp := client.Publisher(topic(b, fmt.Sprintf("raw%d-", time.Now().UnixNano())))
		b.Cleanup(tp.Stop)
		payload := make([]byte, 200)
		ctx := context.Background()
		b.ResetTimer()
		start := time.Now()
		for done := 0; done < b.N; done += 1000 {
			n := min(1000, b.N-done)
			results := make([]*gpubsub.PublishResult, n)
			for i := range results {
				results[i] = tp.Publish(ctx, &gpubsub.Message{Data: payload, Attributes: map[string]string{"outbox-id": outbox.NewID().String()}})
			}
			for i, r := range results {
				if _, err := r.Get(ctx); err != nil {
					b.Fatalf("message %d: %v", i, err)
				}
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	})
}

// drainPubSub is one case of BenchmarkDrainPubSub: a topic of its own,
// made with topic.
func drainPubSub(b *testing.B, project string, keys int, unordered bool, topic func(*testing.B, string) string) {
	mode := "ordered"
	if unordered {
		mode = "unordered"
	}
	prefix := fmt.Sprintf("%s%d-%d-", mode, keys, time.Now().UnixNano())
	topic(b, prefix)
	benchDrainKeys(b, keys, 1, 0, func(b *testing.B, _ *bundle) publishers.Publisher {
		p, err := pubsubpub.NewPublisher(context.Background(), &pubsubpub.PublisherConfig{Project: project, TopicPrefix: prefix,
			NoOrdering: unordered})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close() })
		return p
	}, &relay.Config{Unordered: unordered})
}
