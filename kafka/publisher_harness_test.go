package kafka_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/outboxgo/outbox/internal/testenv"
	kafkapub "github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// testMaxRecordBytes is the publishers' MaxRecordBytes in the tests: small,
// so the oversize case sends little.
const testMaxRecordBytes = 64 << 10

// partitions of every test topic: more than one, so order per key is
// order per partition.
const partitions = 3

var topicSeq atomic.Int64

// newTopicName returns a topic name no other test uses.
func newTopicName(t testing.TB) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return fmt.Sprintf("outbox-test-%d-%d-%s", os.Getpid(), topicSeq.Add(1), name)
}

// realBrokers are the brokers of a real Kafka to test against, from
// OUTBOX_TEST_KAFKA_BROKERS (comma-separated), or nil: test against kfake.
func realBrokers() []string {
	v := os.Getenv("OUTBOX_TEST_KAFKA_BROKERS")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// brokers returns the brokers a test publishes to: the real Kafka's, or a
// kfake cluster's of its own, closed at cleanup.
func brokers(t testing.TB) []string {
	if b := realBrokers(); b != nil {
		testenv.RequireTCP(t, "Kafka (OUTBOX_TEST_KAFKA_BROKERS)", b[0])
		return b
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// createTopic creates topic on brokers (with the client options opts) and
// deletes it at cleanup.
func createTopic(t testing.TB, brokers []string, topic string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
	})
}

// testTopic is the outbox topic every suite case publishes to; the Kafka
// topic prefix (a topic per test) isolates the tests.
const testTopic = "events"

var harness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		if strings.Contains(t.Name(), "/Refused/") {
			return saslEnv(t)
		}
		b := brokers(t)
		prefix := newTopicName(t) + "."
		createTopic(t, b, prefix+testTopic)
		return env(b, prefix)
	},
	Outage: func(t *testing.T) publishertest.Outage {
		k := startKfake(t)
		prefix := newTopicName(t) + "."
		createTopic(t, k.addrs(), prefix+testTopic)
		return publishertest.Outage{
			Env:   env(k.addrs(), prefix),
			Stop:  k.stop,
			Start: k.start,
		}
	},
	Refusals: []publishertest.Refusal{
		saslRefusal("wrong password", saslUser, "wrong-password"),
		saslRefusal("unknown user", "nobody", saslPassword),
	},
}

// The SASL user of the refusals' kfake clusters.
const (
	saslUser     = "outbox"
	saslPassword = "right-password"
)

// saslTargets are the brokers and topic prefix of each refusal's env.
var saslTargets sync.Map // *testing.T → saslTarget

type saslTarget struct {
	brokers []string
	prefix  string
}

// saslEnv is an env on a kfake cluster of the test's own that requires
// SASL/PLAIN (saslUser, saslPassword).
func saslEnv(t *testing.T) publishertest.Env {
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
	return env(b, prefix, auth)
}

// saslRefusal is a publisher made from a kafka:// URL with the wrong
// credentials for the refusal's SASL cluster.
func saslRefusal(name, user, pass string) publishertest.Refusal {
	return publishertest.Refusal{Name: name, New: func(t *testing.T, _ publishertest.Env) (publishers.Publisher, error) {
		v, ok := saslTargets.Load(t)
		if !ok {
			t.Fatal("no cluster: Setup did not run for this refusal")
		}
		tg := v.(saslTarget)
		u := "kafka://" + url.UserPassword(user, pass).String() + "@" + strings.Join(tg.brokers, ",") +
			"?topic_prefix=" + url.QueryEscape(tg.prefix)
		p, err := kafkapub.NewFromURL(u)
		if err != nil {
			return nil, err // a nil *Publisher is no nil Publisher
		}
		return p, nil
	}}
}

// env is the suite's env on brokers, whose clients use opts (SASL).
func env(brokers []string, prefix string, opts ...kgo.Opt) publishertest.Env {
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, kafkapub.Config{Brokers: brokers, TopicPrefix: prefix, MaxRecordBytes: testMaxRecordBytes, Options: opts})
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return read(t, brokers, prefix+testTopic, prefix, n, timeout, opts...)
		},
		MaxPayload: testMaxRecordBytes,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg kafkapub.Config) *kafkapub.Publisher {
	t.Helper()
	p, err := kafkapub.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
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
				ID:      h[kafkapub.HeaderID],
				Key:     string(r.Key),
				Type:    h[kafkapub.HeaderType],
				Headers: h,
				Payload: r.Value,
				Topic:   strings.TrimPrefix(r.Topic, prefix),
			})
		})
	}
	return out
}

// fake is a kfake cluster that keeps its data in a directory, so it can be
// stopped and started again on the same port with what it stored.
type fake struct {
	dir  string
	port int
	c    *kfake.Cluster
}

func startKfake(t *testing.T) *fake {
	f := &fake{dir: t.TempDir()}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(f.dir), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	f.c = c
	_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	f.port, _ = strconv.Atoi(port)
	t.Cleanup(func() {
		if f.c != nil {
			f.c.Close()
		}
	})
	return f
}

func (f *fake) addrs() []string { return []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(f.port))} }

func (f *fake) stop(*testing.T) {
	f.c.Close()
	f.c = nil
}

func (f *fake) start(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(f.dir), kfake.Ports(f.port), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake restart on port %d: %v", f.port, err)
	}
	f.c = c
}

func TestConformance(t *testing.T) {
	publishertest.Run(t, harness)
}
