package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	kafkapub "github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrainKafkaKeys drains a backlog of b.N events (200-byte
// payloads) from PostgreSQL to Kafka on kfake (in process, 6 partitions)
// over 1 and 1,000 keys, the modes interleaved in one run: unordered
// (relay.Config.Unordered); ordered, the relay's default with the kafka
// publisher as it ships (KeepsKeyOrder false: one event of a key in flight
// at a time); and ordered-pipelined, the same publisher behind a wrapper
// claiming KeepsKeyOrder true, so the relay sends a key's run in one call.
// The kafka publisher cannot promise that (see the kafka package
// documentation, "Key order within a call"): that row is only the rate a
// publisher that could would reach, not a configuration to use.
//
// Each row runs with the publisher's default linger (none) and with
// franz-go's (kgo.ProducerLinger(10ms)), which holds a partition's first
// record that long before sending it: in ordered mode, one event of a hot
// key per call, that wait is the rate. raw-sync is franz-go producing one
// record at a time (ProduceSync, acks=all, no linger): the bound of a key
// with one event in flight.
//
//	go test -run '^$' -bench DrainKafkaKeys -benchtime 20000x ./relay/
func BenchmarkDrainKafkaKeys(b *testing.B) {
	b.Run("raw-sync", benchKafkaSync)
	for _, keys := range []int{1, 1000} {
		for _, linger := range []string{"default", "10ms"} {
			for _, mode := range []string{"unordered", "ordered", "ordered-pipelined"} {
				b.Run(fmt.Sprintf("keys=%d/linger=%s/%s", keys, linger, mode), func(b *testing.B) {
					var opts []kgo.Opt
					if linger == "10ms" {
						opts = append(opts, kgo.ProducerLinger(10*time.Millisecond))
					}
					var pub publishers.Publisher = kafkaKfake(b, opts...)
					if mode == "ordered-pipelined" {
						pub = claimsKeyOrder{pub}
					}
					drainKeys(b, keys, pub, &relay.Config{Unordered: mode == "unordered"})
				})
			}
		}
	}
}

// kafkaKfake is a kafka publisher to a kfake cluster of its own with the
// topic "bench" (6 partitions), with the extra client options opts.
func kafkaKfake(b *testing.B, opts ...kgo.Opt) *kafkapub.Publisher {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p, err := kafkapub.NewPublisher(&kafkapub.PublisherConfig{Brokers: c.ListenAddrs(), ClientOptions: opts})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// claimsKeyOrder is a publisher that claims publishers.OrderKeeper, for
// measuring what the relay's pipelined path would give. Benchmarks only.
type claimsKeyOrder struct{ publishers.Publisher }

func (claimsKeyOrder) KeepsKeyOrder() bool { return true }

// drainKeys writes b.N events over keys keys, then times one relay with
// pub and cfg draining them.
func drainKeys(b *testing.B, keys int, pub publishers.Publisher, cfg *relay.Config) {
	bd := setup(b)
	n := b.N
	seed(b, bd, n, keys)
	cfg.PollInterval = 10 * time.Millisecond
	db, err := postgres.New(pgtest.Pool(b), bd.cfg)
	if err != nil {
		b.Fatal(err)
	}
	r, err := relay.New(db.Store(), pub, cfg)
	if err != nil {
		b.Fatal(err)
	}
	timeDrain(b, r, n, nil)
}

// benchKafkaSync produces b.N records of one key to kfake, each once the
// one before is acknowledged.
func benchKafkaSync(b *testing.B) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	ctx := context.Background()
	payload := make([]byte, 200)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Key: []byte("0"), Value: payload}).FirstErr(); err != nil {
		b.Fatal(err) // connected, metadata and producer ID loaded
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "bench", Key: []byte("0"), Value: payload}).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
