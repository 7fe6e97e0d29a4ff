package kafka_test

import (
	"context"
	"fmt"
	"net"
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
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	kafkapub "github.com/outboxgo/outbox/kafka"
	kafkasub "github.com/outboxgo/outbox/kafka/kafkasub"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			if strings.Contains(t.Name(), "/Refused/") {
				return saslEnv(t).env()
			}
			return newEnv(t, brokers(t)).env()
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
			return subscribertest.Outage{Env: newEnv(t, c.ListenAddrs()).env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{OrderPerKey: true, HeldWhileDelivered: true},
		Refusals: []subscribertest.Refusal{
			saslRefusal("wrong password", saslUser, "wrong-password"),
			saslRefusal("unknown user", "nobody", saslPassword),
		},
	})
}

// The SASL user of the refusals' kfake clusters.
const (
	saslUser     = "outbox"
	saslPassword = "right-password"
)

// saslEnvs are the refusals' envs.
var saslEnvs sync.Map // *testing.T → *env

// saslEnv is an env on a kfake cluster of the test's own that requires
// SASL/PLAIN (saslUser, saslPassword).
func saslEnv(t *testing.T) *env {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", saslUser, saslPassword))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	e := newEnv(t, c.ListenAddrs(), kgo.SASL(plain.Auth{User: saslUser, Pass: saslPassword}.AsMechanism()))
	saslEnvs.Store(t, e)
	t.Cleanup(func() { saslEnvs.Delete(t) })
	return e
}

// saslRefusal is a subscriber with the wrong credentials for the refusal's
// SASL cluster.
func saslRefusal(name, user, pass string) subscribertest.Refusal {
	return subscribertest.Refusal{Name: name, New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
		v, ok := saslEnvs.Load(t)
		if !ok {
			t.Fatal("no cluster: Setup did not run for this refusal")
		}
		e := v.(*env)
		cfg := e.config(c)
		// Only the bad credentials (kgo.SASL appends mechanisms: the good
		// ones of the env would be tried first).
		cfg.Options = []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond), kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())}
		sub, err := kafkasub.New(c.Inbox, c.Handler, cfg)
		if err != nil {
			return nil, err // a nil *Subscriber is no nil Subscriber
		}
		return sub, nil
	}}
}

// advertised is a listener that gives another address (a proxy's) as its
// own, which kfake advertises to clients.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

const partitions = 3

var seq atomic.Int64

// brokers are a kfake cluster of the test's own, or
// OUTBOX_TEST_KAFKA_BROKERS.
func brokers(t testing.TB) []string {
	if v := os.Getenv("OUTBOX_TEST_KAFKA_BROKERS"); v != "" {
		b := strings.Split(v, ",")
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

// env is a topic and a dead-letter topic of the test's own.
type env struct {
	brokers []string
	prefix  string
	opts    []kgo.Opt // of every client (SASL)
}

func newEnv(t testing.TB, brokers []string, opts ...kgo.Opt) *env {
	t.Helper()
	e := &env{brokers: brokers, prefix: fmt.Sprintf("outbox-subtest-%d-%d.", os.Getpid(), seq.Add(1)), opts: opts}
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

func (e *env) topic() string     { return e.prefix + "orders" }
func (e *env) deadTopic() string { return e.prefix + "dead" }

// client is a plain client of the brokers, closed at cleanup.
func (e *env) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(e.brokers...)}, e.opts...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (e *env) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.lag,
		DeadLetters: e.deadLetters, Source: e.topic(), Orphan: e.orphan}
}

// config is the subscriber config for c; Concurrency and RedeliverAfter
// have no counterpart.
func (e *env) config(c subscribertest.Config) kafkasub.Config {
	cfg := kafkasub.Config{Brokers: e.brokers, Topics: []string{e.topic()}, TopicPrefix: e.prefix, Group: c.Group,
		DeadLetterTopic: e.deadTopic(), MaxDeliveries: c.MaxDeliveries, Backoff: kafkasub.Backoff{Min: c.BackoffMin, Max: c.BackoffMax},
		Options: append([]kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}, e.opts...), Hooks: kafkasub.Hooks{AfterCommit: c.AfterCommit}}
	if c.AfterSettle != nil {
		cfg.Hooks.AfterSettle = func(st kafkasub.Settlement) { c.AfterSettle(settlement(st)) }
	}
	return cfg
}

func settlement(st kafkasub.Settlement) subscribertest.Settlement {
	a := map[kafkasub.Action]subscribertest.Action{kafkasub.ActionCommit: subscribertest.ActionAck,
		kafkasub.ActionRetry: subscribertest.ActionRetry, kafkasub.ActionDeadLetter: subscribertest.ActionDeadLetter,
		kafkasub.ActionAbandon: subscribertest.ActionRelease}[st.Action]
	return subscribertest.Settlement{Message: st.Message, Delivery: st.Delivery, Outcome: st.Outcome, Err: st.Err,
		Action: a, Delay: st.RetryDelay}
}

func (e *env) newSub(_ *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	return kafkasub.New(c.Inbox, c.Handler, e.config(c))
}

// publish publishes msgs through the outbox's own Kafka publisher.
func (e *env) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := kafkapub.New(kafkapub.Config{Brokers: e.brokers, TopicPrefix: e.prefix, Options: e.opts})
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

func (e *env) publishNoID(t *testing.T, payload string) {
	t.Helper()
	r := &kgo.Record{Topic: e.topic(), Key: []byte("k1"), Value: []byte(payload)}
	if err := e.client(t).ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// lag is how many records of the topic group has not committed.
func (e *env) lag(t *testing.T, group string) int {
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
func (e *env) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
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
			d, _ := strconv.Atoi(hs[kafkasub.HeaderDeliveries])
			out = append(out, subscribertest.DeadLetter{ID: hs[kafkapub.HeaderID], Payload: string(r.Value), Headers: hs,
				Error: hs[kafkasub.HeaderError], Deliveries: d, Source: hs[kafkasub.HeaderTopic], Consumer: hs[kafkasub.HeaderGroup]})
		}
	}
	return out
}

// orphan polls n records as a member of c.Group that then leaves the group
// without committing their offsets: the next member reads them again.
func (e *env) orphan(t *testing.T, c subscribertest.Config, n int) {
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
