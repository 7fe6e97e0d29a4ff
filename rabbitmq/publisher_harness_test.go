package rabbitmq_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/rabbitmq"
)

// rabbitURL is the shared RabbitMQ: OUTBOX_TEST_AMQP_URL, or the local one.
func rabbitURL() string {
	return testenv.Getenv("OUTBOX_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
}

// testMaxMessageSize is the publishers' MaxMessageSize in the tests.
const testMaxMessageSize = 64 << 10

// testTopic is the topic (routing key) of the suite; the exchange of each
// test isolates the tests.
const testTopic = "events"

var seq atomic.Int64

// dialRabbit connects to the shared RabbitMQ, or ends the test.
func dialRabbit(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.DialConfig(rabbitURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		testenv.Unreachable(t, "RabbitMQ at "+rabbitURL(), err)
	}
	return conn
}

// topology declares an exchange and a queue bound to it with routing key
// testTopic, both deleted at cleanup, and returns their names.
func topology(t testing.TB) (exchange, queue string) {
	t.Helper()
	conn := dialRabbit(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	name := fmt.Sprintf("outbox-test-%d-%d", os.Getpid(), seq.Add(1))
	if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange: %v", err)
	}
	if _, err := ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatalf("declare queue: %v", err)
	}
	if err := ch.QueueBind(name, testTopic, name, false, nil); err != nil {
		t.Fatalf("bind: %v", err)
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(rabbitURL())
		if err != nil {
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		_, _ = ch.QueueDelete(name, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
	return name, name
}

// exchanges maps a test's name to the exchange its Setup declared, for
// the refusals (publishertest.Env does not name it).
var exchanges sync.Map

var harness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		ex, q := topology(t)
		exchanges.Store(t.Name(), ex)
		t.Cleanup(func() { exchanges.Delete(t.Name()) })
		return pubEnv(rabbitURL(), ex, q)
	},
	Outage: func(t *testing.T) publishertest.Outage {
		ex, q := topology(t)
		u, _ := url.Parse(rabbitURL())
		px := tcpproxy.Start(t, u.Host)
		u.Host = px.Addr
		return publishertest.Outage{
			Env:   pubEnv(u.String(), ex, q),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	Refusals: []publishertest.Refusal{
		{Name: "wrong password", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return refusedFromURL(t, env, func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), "wrong-password") }, "")
		}},
		{Name: "unknown vhost", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return refusedFromURL(t, env, func(u *url.URL) { u.Path, u.RawPath = "/outbox-no-such-vhost", "" }, "")
		}},
		{Name: "missing exchange", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return refusedFromURL(t, env, nil, "-missing")
		}},
		{Name: "user without write permission", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			user := readOnlyUser(t)
			return refusedFromURL(t, env, func(u *url.URL) { u.User = user }, "")
		}},
	},
}

// refusedFromURL is a refused publisher as the CLI makes it, from a URL
// through the registered scheme: the shared broker's, changed by edit,
// publishing to the test's exchange with suffix appended.
func refusedFromURL(t *testing.T, env publishertest.Env, edit func(*url.URL), suffix string) (publishers.Publisher, error) {
	ex, ok := exchanges.Load(t.Name())
	if !ok {
		t.Fatal("no exchange for this test: Setup was not called with its t")
	}
	u, err := url.Parse(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(u)
	}
	u.RawQuery = url.Values{"exchange": {ex.(string) + suffix}, "max_message_size": {fmt.Sprint(env.MaxPayload)},
		"confirm_timeout": {"20s"}}.Encode()
	p, err := backend.OpenBroker(context.Background(), u.String(), nil)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func pubEnv(pubURL, exchange, queue string) publishertest.Env {
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, &rabbitmq.PublisherConfig{URL: pubURL, Exchange: exchange, MaxMessageSize: testMaxMessageSize})
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return read(t, queue, n, timeout)
		},
		MaxPayload: testMaxMessageSize,
		Dedup:      false, // RabbitMQ stores every copy of a re-sent ID
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg *rabbitmq.PublisherConfig) *rabbitmq.Publisher {
	t.Helper()
	p, err := rabbitmq.NewPublisher(cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

// read consumes queue without acknowledging until it has n messages or
// timeout passes; closing the channel puts them all back.
func read(t *testing.T, queue string, n int, timeout time.Duration) []publishertest.Received {
	t.Helper()
	conn := dialRabbit(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("channel: %v", err)
	}
	defer ch.Close()
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		t.Fatalf("consume %s: %v", queue, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var out []publishertest.Received
	for len(out) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				t.Fatalf("consumer of %s closed", queue)
			}
			h := make(map[string]string, len(d.Headers))
			for k, v := range d.Headers {
				h[k] = fmt.Sprint(v)
			}
			key, _ := d.Headers[rabbitmq.HeaderKey].(string)
			out = append(out, publishertest.Received{
				ID:      d.MessageId,
				Key:     key,
				Type:    d.Type,
				Headers: h,
				Payload: d.Body,
				Topic:   d.RoutingKey,
			})
		case <-timer.C:
			return out
		}
	}
	return out
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, harness)
}
