package relay_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/testenv"
	kafkapub "github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
	redispub "github.com/outboxgo/outbox/redis"
	"github.com/outboxgo/outbox/relay"
)

// brokersKeys are BenchmarkDrainBrokers' key counts.
var brokersKeys = flag.String("brokers-keys", "1000", "BenchmarkDrainBrokers' key counts, comma-separated")

// BenchmarkDrainBrokers drains a backlog of b.N events from PostgreSQL to
// each broker the project publishes to, unordered and ordered, over each
// of -brokers-keys keys: Kafka on kfake (in-process), RabbitMQ and Redis
// on the local servers (Kafka and Redis with and without key runs). NATS
// is BenchmarkDrain.
//
//	go test -run '^$' -bench DrainBrokers -benchtime 50000x ./relay/ -brokers-keys 10,1000
func BenchmarkDrainBrokers(b *testing.B) {
	keyCounts := parseKeyCounts(b, "brokers-keys", *brokersKeys)
	brokers := []struct {
		name string
		pub  func(b *testing.B, _ *bundle) publishers.Publisher
	}{
		{"kafka", func(b *testing.B, _ *bundle) publishers.Publisher { return kafkaKfake(b, kafkapub.PublisherConfig{}) }},
		{"kafka-no-key-runs", func(b *testing.B, _ *bundle) publishers.Publisher {
			return kafkaKfake(b, kafkapub.PublisherConfig{NoKeyRuns: true})
		}},
		{"rabbitmq", rabbitBench},
		{"redis", func(b *testing.B, _ *bundle) publishers.Publisher { return redisBench(b, false) }},
		{"redis-no-key-runs", func(b *testing.B, _ *bundle) publishers.Publisher { return redisBench(b, true) }},
	}
	for _, br := range brokers {
		for _, keys := range keyCounts {
			for _, mode := range []string{"unordered", "ordered"} {
				b.Run(fmt.Sprintf("%s/keys=%d/%s", br.name, keys, mode), func(b *testing.B) {
					benchDrainKeys(b, keys, 1, 0, br.pub, &relay.Config{Unordered: mode == "unordered"})
				})
			}
		}
	}
}

func rabbitBench(b *testing.B, _ *bundle) publishers.Publisher {
	name := rabbitTopology(b, false)
	p, err := rabbitpub.NewPublisher(&rabbitpub.PublisherConfig{URL: rabbitBenchURL, Exchange: name})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// redisBench is a Redis publisher on a stream of its own; noKeyRuns is
// its PublisherConfig.NoKeyRuns (a key's events then go one at a time).
func redisBench(b *testing.B, noKeyRuns bool) publishers.Publisher {
	testenv.RequireTCP(b, "Redis at 127.0.0.1:6379", "127.0.0.1:6379")
	prefix := fmt.Sprintf("outbox-bench-%d:", time.Now().UnixNano())
	p, err := redispub.NewPublisher(&redispub.PublisherConfig{URL: "redis://127.0.0.1:6379/0", StreamPrefix: prefix, NoKeyRuns: noKeyRuns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = p.Close()
		c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
		c.Del(context.Background(), prefix+"bench")
		_ = c.Close()
	})
	return p
}
