package kafka_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/kafka"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			if strings.Contains(t.Name(), "/Refused/") {
				return subSaslEnv(t).env()
			}
			return newSubEnv(t, brokers(t)).env()
		},
		Outage: func(t *testing.T) subscribertest.Outage {
			if os.Getenv("OUTBOX_TEST_KAFKA_BROKERS") != "" {
				t.Skip("the outage case runs on kfake only")
			}
			// The broker advertises a proxy in front of it: every client
			// (the test's own too) goes through the proxy.
			var px *tcpproxy.Proxy
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions),
				kfake.ListenFn(func(network, address string) (net.Listener, error) {
					ln, err := net.Listen(network, address)
					if err != nil {
						return nil, err
					}
					px = tcpproxy.Start(t, ln.Addr().String())
					addr, err := net.ResolveTCPAddr("tcp", px.Addr)
					return advertised{ln, addr}, err
				}))
			if err != nil {
				t.Fatalf("kfake: %v", err)
			}
			t.Cleanup(c.Close)
			return subscribertest.Outage{Env: newSubEnv(t, c.ListenAddrs()).env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{OrderPerKey: true, HeldWhileDelivered: true},
		Refusals: []subscribertest.Refusal{
			subSaslRefusal("wrong password", saslUser, "wrong-password"),
			subSaslRefusal("unknown user", "nobody", saslPassword),
		},
	})
}

// subSaslEnvs are the refusals' envs.
var subSaslEnvs sync.Map // *testing.T → *subEnv

// subSaslEnv is an env on a kfake cluster of the test's own that requires
// SASL/PLAIN (saslUser, saslPassword).
func subSaslEnv(t *testing.T) *subEnv {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", saslUser, saslPassword))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	e := newSubEnv(t, c.ListenAddrs(), kgo.SASL(plain.Auth{User: saslUser, Pass: saslPassword}.AsMechanism()))
	subSaslEnvs.Store(t, e)
	t.Cleanup(func() { subSaslEnvs.Delete(t) })
	return e
}

// subSaslRefusal is a subscriber with the wrong credentials for the refusal's
// SASL cluster.
func subSaslRefusal(name, user, pass string) subscribertest.Refusal {
	return subscribertest.Refusal{Name: name, New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
		v, ok := subSaslEnvs.Load(t)
		if !ok {
			t.Fatal("no cluster: Setup did not run for this refusal")
		}
		e := v.(*subEnv)
		cfg := e.config(c)
		// Only the bad credentials (kgo.SASL appends mechanisms: the good
		// ones of the env would be tried first).
		cfg.ClientOptions = []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}
		sub, err := kafka.NewSubscriber(c.Inbox, c.Handler, cfg)
		if err != nil {
			return nil, err // a nil *Subscriber is no nil Subscriber
		}
		return sub, nil
	}}
}

// subEnv is a topic and a dead-letter topic of the test's own.
type subEnv struct {
	brokers []string
	prefix  string
	opts    []kgo.Opt // of every client (SASL)
}

func newSubEnv(t testing.TB, brokers []string, opts ...kgo.Opt) *subEnv {
	t.Helper()
	e := &subEnv{brokers: brokers, prefix: fmt.Sprintf("outbox-subtest-%d-%d.", os.Getpid(), topicSeq.Add(1)), opts: opts}
	cl := e.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	topics := []string{e.topic(), e.deadTopic()}
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	})
	return e
}

func (e *subEnv) topic() string     { return e.prefix + "orders" }
func (e *subEnv) deadTopic() string { return e.prefix + "dead" }

// client is a plain client of the brokers, closed at cleanup.
func (e *subEnv) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(e.brokers...)}, e.opts...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.lag,
		DeadLetters: e.deadLetters, Source: e.topic(), Orphan: e.orphan}
}

// config is the subscriber config for c: its Options as they are (the
// Concurrency of some cases is ignored, as documented), with a quick fetch
// and a short session, so that the member a case cut off from the broker
// is out of the group in seconds (the default is 45 s); RedeliverAfter has
// no counterpart.
func (e *subEnv) config(c subscribertest.Config) *kafka.SubscriberConfig {
	return &kafka.SubscriberConfig{Options: c.Options, Brokers: e.brokers, Topics: []string{e.topic()}, TopicPrefix: e.prefix,
		Group: c.Group, DeadLetterTopic: e.deadTopic(),
		ClientOptions: append([]kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(time.Second)}, e.opts...)}
}

func (e *subEnv) newSub(_ *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	sub, err := kafka.NewSubscriber(c.Inbox, c.Handler, e.config(c))
	if err != nil {
		return nil, err // a nil *Subscriber is no nil Subscriber
	}
	return sub, nil
}

// publish publishes msgs through the outbox's own Kafka publisher.
func (e *subEnv) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := kafka.NewPublisher(&kafka.PublisherConfig{Brokers: e.brokers, TopicPrefix: e.prefix, ClientOptions: e.opts})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

func (e *subEnv) publishNoID(t *testing.T, payload string) {
	t.Helper()
	r := &kgo.Record{Topic: e.topic(), Key: []byte("k1"), Value: []byte(payload)}
	if err := e.client(t).ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// lag is how many records of the topic group has not committed.
func (e *subEnv) lag(t *testing.T, group string) int {
	t.Helper()
	adm := kadm.NewClient(e.client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, e.topic())
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup(o.Topic, o.Partition)
		lag += o.Offset - max(c.At, 0)
	})
	return int(lag)
}

// deadLetters reads the dead-letter topic from the start.
func (e *subEnv) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
	t.Helper()
	cl := e.client(t, kgo.ConsumeTopics(e.deadTopic()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []subscribertest.DeadLetter
	for len(out) < n && ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			hs := map[string]string{}
			for _, h := range r.Headers {
				hs[h.Key] = string(h.Value)
			}
			d, _ := strconv.Atoi(hs[kafka.HeaderDeliveries])
			out = append(out, subscribertest.DeadLetter{ID: hs[kafka.HeaderID], Payload: string(r.Value), Headers: hs,
				Error: hs[kafka.HeaderError], Deliveries: d, Source: hs[kafka.HeaderTopic], Consumer: hs[kafka.HeaderGroup]})
		}
	}
	return out
}

// orphan polls n records as a member of c.Group that then leaves the group
// without committing their offsets: the next member reads them again.
func (e *subEnv) orphan(t *testing.T, c subscribertest.Config, n int) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.brokers...), kgo.ConsumerGroup(c.Group), kgo.ConsumeTopics(e.topic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100 * time.Millisecond)}, e.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	for got < n && ctx.Err() == nil {
		got += len(cl.PollFetches(ctx).Records())
	}
	if got != n {
		t.Fatalf("the dying member got %d records, want %d", got, n)
	}
}
