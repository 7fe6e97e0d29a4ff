package rabbitmq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/rabbitmq"
)

// TestUnroutable: a message no queue takes fails alone, unmarked (retried,
// then dead-lettered), and the routable ones of the batch are stored.
func TestUnroutable(t *testing.T) {
	ex, q := topology(t)
	p := newPublisher(t, &rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: ex})
	defer p.Close()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("a")},
		{ID: outbox.NewID(), Topic: "nowhere", Payload: []byte("b")},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("c")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	for i, err := range errs {
		switch {
		case i == 1 && (!errors.Is(err, rabbitmq.ErrUnroutable) || publishers.IsUnavailable(err) || publishers.IsPermanent(err)):
			t.Errorf("unroutable message: got %v, want an unmarked ErrUnroutable", err)
		case i != 1 && err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	got := read(t, q, 2, 15*time.Second)
	if len(got) != 2 || got[0].ID != msgs[0].ID.String() || got[1].ID != msgs[2].ID.String() {
		t.Errorf("read %+v", got)
	}
}

// TestMissingExchange: publishing to an exchange that does not exist fails
// as Misconfigured — not Permanent (no event's fault), not Unavailable —
// and the publisher publishes once the exchange exists.
func TestMissingExchange(t *testing.T) {
	ex, _ := topology(t)
	missing := ex + "-missing"
	p := newPublisher(t, &rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: missing})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: testTopic}, {ID: outbox.NewID(), Topic: testTopic}}
	for i, err := range p.Publish(ctx, msgs) {
		if !misconfiguredOnly(err) || !errors.Is(err, rabbitmq.ErrConfigRefused) {
			t.Errorf("message %d: got %v, want ErrConfigRefused classified Misconfigured only", i, err)
		}
	}
	q := declare(t, missing)
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Errorf("after the exchange was declared: message %d: %v", i, err)
		}
	}
	if got := read(t, q, 2, 15*time.Second); len(got) != 2 {
		t.Errorf("read %d messages, want 2", len(got))
	}
}

// TestExchangeDeletedMidRun: an exchange deleted under a running
// publisher fails the next batch as Misconfigured, and Check says so.
func TestExchangeDeletedMidRun(t *testing.T) {
	ex, _ := topology(t)
	p := newPublisher(t, &rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: ex})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: testTopic}})[0]; err != nil {
		t.Fatal(err)
	}
	conn := dialRabbit(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDelete(ex, false, false); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		msgs := []outbox.Message{{ID: outbox.NewID(), Topic: testTopic}, {ID: outbox.NewID(), Topic: testTopic}, {ID: outbox.NewID(), Topic: testTopic}}
		for i, err := range p.Publish(ctx, msgs) {
			if !misconfiguredOnly(err) {
				t.Errorf("round %d: message %d: got %v, want Misconfigured only", round, i, err)
			}
		}
	}
	if err := p.Check(ctx); !misconfiguredOnly(err) {
		t.Errorf("Check: got %v, want Misconfigured only", err)
	}
}

// misconfiguredOnly: err is classified Misconfigured, and neither
// Permanent nor Unavailable.
func misconfiguredOnly(err error) bool {
	return publishers.IsMisconfigured(err) && !publishers.IsPermanent(err) && !publishers.IsUnavailable(err)
}

// declare declares exchange (direct) and a queue of the same name bound to
// it with testTopic, deleted at cleanup, and returns the queue's name.
func declare(t *testing.T, exchange string) string {
	t.Helper()
	conn := dialRabbit(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(exchange, amqp.ExchangeDirect, false, false, false, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDeclare(exchange, false, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(exchange, testTopic, exchange, false, nil)
	}
	if err != nil {
		t.Fatalf("declare %s: %v", exchange, err)
	}
	t.Cleanup(func() {
		conn, err := amqp.Dial(rabbitURL())
		if err != nil {
			return
		}
		defer conn.Close()
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(exchange, false, false, false)
			_ = ch.ExchangeDelete(exchange, false, false)
		}
	})
	return exchange
}

// TestRoutingHeadersRefused: a message with a header named CC or BCC —
// RabbitMQ's sender-selected distribution, which would route it with the
// header's value as more routing keys — fails alone and permanently,
// without being sent; the rest of the batch is published.
func TestRoutingHeadersRefused(t *testing.T) {
	ex, q := topology(t)
	p := newPublisher(t, &rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: ex})
	defer p.Close()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("a")},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("b"), Headers: map[string]string{"CC": q}},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("c"), Headers: map[string]string{"BCC": q}},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("d"), Headers: map[string]string{"cc": "lower case is no routing header"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for i, err := range p.Publish(ctx, msgs) {
		switch {
		case (i == 1 || i == 2) && (!publishers.IsPermanent(err) || !errors.Is(err, rabbitmq.ErrReservedHeader)):
			t.Errorf("message %d: got %v, want a permanent ErrReservedHeader", i, err)
		case (i == 0 || i == 3) && err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	got := read(t, q, 3, 2*time.Second) // 3: would a refused one arrive?
	if len(got) != 2 || got[0].ID != msgs[0].ID.String() || got[1].ID != msgs[3].ID.String() {
		t.Errorf("read %+v, want only messages 0 and 3", got)
	}
}

func TestNewUnreachableIsUnavailable(t *testing.T) {
	px := tcpproxy.Start(t, "127.0.0.1:1")
	addr := px.Addr
	px.Cut()
	_, err := rabbitmq.NewPublisher(&rabbitmq.PublisherConfig{URL: "amqp://guest:s3cret@" + addr + "/", DialTimeout: time.Second})
	if !publishers.IsUnavailable(err) {
		t.Errorf("got %v, want unavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// TestNotRepresentable: a message AMQP 0-9-1 cannot carry — a header name
// or a routing key over 255 bytes (a short string) — fails alone and
// permanently, without being sent, and the rest of the batch is published
// on the same connection.
func TestNotRepresentable(t *testing.T) {
	ex, q := topology(t)
	p := newPublisher(t, &rabbitmq.PublisherConfig{URL: rabbitURL(), Exchange: ex, RoutingKey: func(topic string) string {
		if topic == testTopic {
			return topic
		}
		return "app." + topic
	}})
	defer p.Close()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("a")},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("b"), Headers: map[string]string{strings.Repeat("h", 256): "x"}},
		{ID: outbox.NewID(), Topic: strings.Repeat("t", 252), Payload: []byte("c")}, // routing key of 256 bytes
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("d")},
	}
	for round := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		errs := p.Publish(ctx, msgs)
		cancel()
		for i, err := range errs {
			switch {
			case i == 1 && (!publishers.IsPermanent(err) || !strings.Contains(err.Error(), "header name")):
				t.Errorf("round %d: header name of 256 bytes: got %v, want a permanent error naming the header", round, err)
			case i == 2 && (!publishers.IsPermanent(err) || !strings.Contains(err.Error(), "routing key")):
				t.Errorf("round %d: routing key of 256 bytes: got %v, want a permanent error naming the routing key", round, err)
			case (i == 0 || i == 3) && err != nil:
				t.Errorf("round %d: message %d: %v", round, i, err)
			}
		}
	}
	got := read(t, q, 4, 15*time.Second)
	if len(got) != 4 || got[0].ID != msgs[0].ID.String() || got[1].ID != msgs[3].ID.String() {
		t.Errorf("read %+v", got)
	}
}

// TestPublisherConfigChecks: NewPublisher refuses a negative setting,
// naming the field, before it dials; nil is every default (the local
// broker, as guest).
func TestPublisherConfigChecks(t *testing.T) {
	const unreachable = "amqp://guest:guest@127.0.0.1:1/"
	for field, cfg := range map[string]*rabbitmq.PublisherConfig{
		"MaxMessageSize": {URL: unreachable, MaxMessageSize: -1},
		"ConfirmTimeout": {URL: unreachable, ConfirmTimeout: -time.Second},
		"DialTimeout":    {URL: unreachable, DialTimeout: -time.Second},
		"URL":            {URL: "http://guest:s3cret@127.0.0.1/"},
	} {
		_, err := rabbitmq.NewPublisher(cfg)
		if err == nil || !strings.Contains(err.Error(), field) || publishers.IsUnavailable(err) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: got %v, want a config error naming it", field, err)
		}
	}
	if rabbitURL() != rabbitmq.DefaultURL {
		t.Skip("the shared RabbitMQ is not the default URL's")
	}
	p, err := rabbitmq.NewPublisher(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
