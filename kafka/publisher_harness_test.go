package kafka_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// testMaxRecordBytes is the publishers' MaxRecordBytes in the tests: small,
// so the oversize case sends little.
const testMaxRecordBytes = 64 << 10

// testTopic is the outbox topic every suite case publishes to; the Kafka
// topic prefix (a topic per test) isolates the tests.
const testTopic = "events"

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		if strings.Contains(t.Name(), "/Refused/") {
			return pubSaslEnv(t)
		}
		b := brokers(t)
		prefix := newTopicName(t) + "."
		createTopic(t, b, prefix+testTopic)
		return pubEnv(b, prefix)
	},
	Outage: func(t *testing.T) publishertest.Outage {
		k := startKfake(t)
		prefix := newTopicName(t) + "."
		createTopic(t, k.addrs(), prefix+testTopic)
		return publishertest.Outage{
			Env:   pubEnv(k.addrs(), prefix),
			Stop:  k.stop,
			Start: k.start,
		}
	},
	Refusals: []publishertest.Refusal{
		pubSaslRefusal("wrong password", saslUser, "wrong-password"),
		pubSaslRefusal("unknown user", "nobody", saslPassword),
	},
}

// saslTargets are the brokers and topic prefix of each refusal's env.
var saslTargets sync.Map // *testing.T → saslTarget

type saslTarget struct {
	brokers []string
	prefix  string
}

// pubSaslEnv is an env on a kfake cluster of the test's own that requires
// SASL/PLAIN (saslUser, saslPassword).
func pubSaslEnv(t *testing.T) publishertest.Env {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", saslUser, saslPassword))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	b := c.ListenAddrs()
	prefix := newTopicName(t) + "."
	auth := kgo.SASL(plain.Auth{User: saslUser, Pass: saslPassword}.AsMechanism())
	createTopic(t, b, prefix+testTopic, auth)
	saslTargets.Store(t, saslTarget{brokers: b, prefix: prefix})
	t.Cleanup(func() { saslTargets.Delete(t) })
	return pubEnv(b, prefix, auth)
}

// pubSaslRefusal is a publisher opened by a kafka:// URL with the wrong
// credentials for the refusal's SASL cluster.
func pubSaslRefusal(name, user, pass string) publishertest.Refusal {
	return publishertest.Refusal{Name: name, New: func(t *testing.T, _ publishertest.Env) (publishers.Publisher, error) {
		v, ok := saslTargets.Load(t)
		if !ok {
			t.Fatal("no cluster: Setup did not run for this refusal")
		}
		tg := v.(saslTarget)
		u := "kafka://" + url.UserPassword(user, pass).String() + "@" + strings.Join(tg.brokers, ",") +
			"?topic_prefix=" + url.QueryEscape(tg.prefix)
		return backend.OpenBroker(context.Background(), u, nil) // as the CLI opens it
	}}
}

// pubEnv is the suite's env on brokers, whose clients use opts (SASL).
func pubEnv(brokers []string, prefix string, opts ...kgo.Opt) publishertest.Env {
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, &kafka.PublisherConfig{Brokers: brokers, TopicPrefix: prefix, MaxRecordBytes: testMaxRecordBytes, ClientOptions: opts})
		},
		Topic: testTopic,
		Dedup: false, // Kafka has no broker-side dedup by event ID
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return read(t, brokers, prefix+testTopic, prefix, n, timeout, opts...)
		},
		MaxPayload: testMaxRecordBytes,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg *kafka.PublisherConfig) *kafka.Publisher {
	t.Helper()
	p, err := kafka.NewPublisher(cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

// read reads topic from the start with a plain consumer until it has n
// records or timeout passes.
func read(t *testing.T, brokers []string, topic, prefix string, n int, timeout time.Duration, opts ...kgo.Opt) []publishertest.Received {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []publishertest.Received
	for len(out) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Logf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			h := make(map[string]string, len(r.Headers))
			for _, rh := range r.Headers {
				h[rh.Key] = string(rh.Value)
			}
			out = append(out, publishertest.Received{
				ID:      h[kafka.HeaderID],
				Key:     string(r.Key),
				Type:    h[kafka.HeaderType],
				Headers: h,
				Payload: r.Value,
				Topic:   strings.TrimPrefix(r.Topic, prefix),
			})
		})
	}
	return out
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
