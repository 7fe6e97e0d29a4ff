package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxgo/outbox/internal/testenv"
	kafkapub "github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	rabbitpub "github.com/outboxgo/outbox/rabbitmq"
	redispub "github.com/outboxgo/outbox/redis"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrainBrokers drains a backlog of b.N events from PostgreSQL to
// each broker the project publishes to, unordered and ordered (1,000 keys):
// Kafka on kfake (in-process), RabbitMQ and Redis on the local servers.
// NATS is BenchmarkDrain.
//
//	go test -run '^$' -bench DrainBrokers -benchtime 50000x ./relay/
func BenchmarkDrainBrokers(b *testing.B) {
	brokers := []struct {
		name string
		pub  func(b *testing.B, _ *bundle) publishers.Publisher
	}{
		{"kafka", kafkaBench},
		{"rabbitmq", rabbitBench},
		{"redis", redisBench},
	}
	for _, br := range brokers {
		for _, mode := range []string{"unordered", "ordered"} {
			b.Run(br.name+"/"+mode, func(b *testing.B) {
				benchDrain(b, 1, 0, br.pub, &relay.Config{Unordered: mode == "unordered"})
			})
		}
	}
}

func kafkaBench(b *testing.B, _ *bundle) publishers.Publisher {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p, err := kafkapub.NewPublisher(&kafkapub.PublisherConfig{Brokers: c.ListenAddrs()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
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

func redisBench(b *testing.B, _ *bundle) publishers.Publisher {
	testenv.RequireTCP(b, "Redis at 127.0.0.1:6379", "127.0.0.1:6379")
	prefix := fmt.Sprintf("outbox-bench-%d:", time.Now().UnixNano())
	p, err := redispub.NewPublisher(&redispub.PublisherConfig{URL: "redis://127.0.0.1:6379/0", StreamPrefix: prefix})
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
