package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/rabbitmq"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			e := newSubEnv(t, rabbitURL())
			envs.Store(t.Name(), e)
			t.Cleanup(func() { envs.Delete(t.Name()) })
			return e.env()
		},
		Outage: func(t *testing.T) subscribertest.Outage {
			const local = "127.0.0.1:5672"
			if !strings.Contains(rabbitURL(), "@"+local+"/") {
				t.Skip("the outage case proxies the local RabbitMQ only")
			}
			px := tcpproxy.Start(t, local)
			e := newSubEnv(t, strings.Replace(rabbitURL(), local, px.Addr, 1))
			return subscribertest.Outage{Env: e.env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{Concurrency: true},
		Refusals: []subscribertest.Refusal{
			{Name: "wrong password", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				return refusedSub(t, c, func(u *url.URL, _ *rabbitmq.SubscriberConfig) {
					u.User = url.UserPassword(u.User.Username(), "wrong-password")
				})
			}},
			{Name: "unknown vhost", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				return refusedSub(t, c, func(u *url.URL, _ *rabbitmq.SubscriberConfig) { u.Path, u.RawPath = "/outbox-no-such-vhost", "" })
			}},
			{Name: "missing queue", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				return refusedSub(t, c, func(_ *url.URL, cfg *rabbitmq.SubscriberConfig) { cfg.Queue += "-missing" })
			}},
		},
	})
}

// envs maps a test's name to the env its Setup made, for the refusals
// (subscribertest.Env does not name the queue).
var envs sync.Map

// refusedSub is a subscriber of c on the test's queue, its URL and config
// changed by edit; Start must fail with ErrConfigRefused.
func refusedSub(t *testing.T, c subscribertest.Config, edit func(*url.URL, *rabbitmq.SubscriberConfig)) (subscribertest.Subscriber, error) {
	u, err := url.Parse(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := envs.Load(t.Name())
	if !ok {
		t.Fatal("no env for this test: Setup was not called with its t")
	}
	cfg := e.(*subEnv).config(c)
	edit(u, cfg)
	cfg.URL = u.String()
	sub, err := rabbitmq.NewSubscriber(c.Inbox, c.Handler, cfg)
	if err != nil {
		return nil, err
	}
	return refusedStart{t, sub}, nil
}

// refusedStart checks that the refusal is said as such: Start's error
// wraps ErrConfigRefused and prints no password.
type refusedStart struct {
	t *testing.T
	subscribertest.Subscriber
}

func (r refusedStart) Start(ctx context.Context) error {
	err := r.Subscriber.Start(ctx)
	if err != nil && !errors.Is(err, rabbitmq.ErrConfigRefused) {
		r.t.Errorf("Start: %v: want an error wrapping ErrConfigRefused", err)
	}
	if err != nil && strings.Contains(err.Error(), "wrong-password") {
		r.t.Errorf("Start: the error prints the password: %v", err)
	}
	return err
}

// subEnv is an exchange of the test's own, routing "orders" to a queue, and
// a dead-letter queue. Every group shares the one queue.
type subEnv struct {
	ch              *amqp.Channel // the test's own
	subURL          string        // where subscribers connect
	exchange, queue string
	deadQueue       string
	dead            []subscribertest.DeadLetter // taken from deadQueue so far
}

func newSubEnv(t testing.TB, subURL string) *subEnv {
	t.Helper()
	conn, err := amqp.DialConfig(rabbitURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		testenv.Unreachable(t, "RabbitMQ at "+rabbitURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("outbox-subtest-%d-%d", os.Getpid(), seq.Add(1))
	e := &subEnv{ch: ch, subURL: subURL, exchange: name, queue: name, deadQueue: name + "-dead"}
	if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{e.queue, e.deadQueue} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueBind(e.queue, "orders", name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(e.queue, false, false, false)
		_, _ = ch.QueueDelete(e.deadQueue, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
	return e
}

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.held,
		DeadLetters: e.deadLetters, Source: "orders", Consumer: func(string) string { return e.queue }, Orphan: e.orphan}
}

// config is the subscriber config for c: its Options as they are, with a
// quick ReconnectDelay; Group and RedeliverAfter have no counterpart.
func (e *subEnv) config(c subscribertest.Config) *rabbitmq.SubscriberConfig {
	return &rabbitmq.SubscriberConfig{Options: c.Options, URL: e.subURL, Queue: e.queue, DeadLetterRoutingKey: e.deadQueue,
		ReconnectDelay: 20 * time.Millisecond}
}

func (e *subEnv) newSub(_ *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	return rabbitmq.NewSubscriber(c.Inbox, c.Handler, e.config(c))
}

// publish publishes msgs through the outbox's own RabbitMQ publisher.
func (e *subEnv) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := rabbitmq.NewPublisher(&rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: e.exchange})
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
	if err := e.ch.PublishWithContext(context.Background(), e.exchange, "orders", false, false,
		amqp.Publishing{Body: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
}

// held is how many messages the queue holds ready: those delivered to a
// connected consumer and not yet acknowledged are not counted.
func (e *subEnv) held(t *testing.T, _ string) int {
	t.Helper()
	q, err := e.ch.QueueDeclarePassive(e.queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// deadLetters takes the dead letters from their queue, keeping those taken
// before.
func (e *subEnv) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(e.dead) < n && time.Now().Before(deadline) {
		d, ok, err := e.ch.Get(e.deadQueue, true)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			<-tick.C
			continue
		}
		hs := map[string]string{}
		for k, v := range d.Headers {
			hs[k] = fmt.Sprint(v)
		}
		deliveries, _ := d.Headers[rabbitmq.HeaderDeliveries].(int32)
		e.dead = append(e.dead, subscribertest.DeadLetter{ID: d.MessageId, Payload: string(d.Body), Headers: hs,
			Error: hs[rabbitmq.HeaderError], Deliveries: int(deliveries), Source: hs[rabbitmq.HeaderRoutingKey],
			Consumer: hs[rabbitmq.HeaderQueue]})
	}
	return append([]subscribertest.DeadLetter(nil), e.dead...)
}

// orphan takes n messages with a consumer of its own connection, and
// closes the connection without acknowledging them: the broker requeues
// them.
func (e *subEnv) orphan(t *testing.T, _ subscribertest.Config, n int) {
	t.Helper()
	conn, err := amqp.Dial(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Qos(n, 0, false); err != nil {
		t.Fatal(err)
	}
	ds, err := ch.Consume(e.queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case <-ds:
		case <-time.After(30 * time.Second):
			t.Fatalf("the dying consumer got %d messages, want %d", i, n)
		}
	}
}
