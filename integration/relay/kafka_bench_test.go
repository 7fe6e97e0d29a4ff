package relay_test

import (
	"context"
	"fmt"
	"strings"
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
// publisher as it ships (key runs: a batch's events of a key in one
// pipelined call); and ordered-no-key-runs, the same with
// PublisherConfig.NoKeyRuns (one event of a key in flight at a time);
// unordered-no-key-runs is unordered with NoKeyRuns, which never
// publishes on a lane with its write gate (a call of several events of a
// key does otherwise, in unordered mode too).
//
// Each row runs with the publisher's default linger (none) and with
// franz-go's (kgo.ProducerLinger(10ms)), which holds a partition's first
// record that long before sending it: with one event of a hot key per
// call, that wait is the rate. raw-sync is franz-go producing one record
// at a time (ProduceSync, acks=all, no linger): the bound of a key with
// one event in flight.
//
//	go test -run '^$' -bench DrainKafkaKeys -benchtime 20000x ./relay/
func BenchmarkDrainKafkaKeys(b *testing.B) {
	b.Run("raw-sync", benchKafkaSync)
	for _, keys := range []int{1, 1000} {
		for _, linger := range []string{"default", "10ms"} {
			for _, mode := range []string{"unordered", "unordered-no-key-runs", "ordered", "ordered-no-key-runs"} {
				b.Run(fmt.Sprintf("keys=%d/linger=%s/%s", keys, linger, mode), func(b *testing.B) {
					cfg := kafkapub.PublisherConfig{NoKeyRuns: strings.HasSuffix(mode, "-no-key-runs")}
					if linger == "10ms" {
						cfg.ClientOptions = append(cfg.ClientOptions, kgo.ProducerLinger(10*time.Millisecond))
					}
					drainKeys(b, keys, kafkaKfake(b, cfg), &relay.Config{Unordered: strings.HasPrefix(mode, "unordered")})
				})
			}
		}
	}
}

// kafkaKfake is a kafka publisher of cfg to a kfake cluster of its own
// with the topic "bench" (6 partitions).
func kafkaKfake(b *testing.B, cfg kafkapub.PublisherConfig) *kafkapub.Publisher {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cfg.Brokers = c.ListenAddrs()
	p, err := kafkapub.NewPublisher(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

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
