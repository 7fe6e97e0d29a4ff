package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	rabbitsub "github.com/outboxgo/outbox/subscribers/rabbitmq"
)

func stop(t testing.TB, s *rabbitsub.Subscriber[pgx.Tx]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// The same event published three times: one effect, three acks.
func TestSameMessageThreeTimesOneEffect(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	b.publish(t, ev, ev, ev)
	var rec recorder
	cfg := b.config()
	cfg.Hooks.AfterSettle = rec.add
	s := start(t, b, b.effect, cfg)
	waitFor(t, "three acks", 30*time.Second, func() bool { return rec.count(rabbitsub.ActionAck) == 3 })
	stop(t, s)
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	var outcomes []string
	for _, s := range rec.list() {
		outcomes = append(outcomes, s.Outcome.String())
	}
	if got := strings.Join(outcomes, ","); got != "handled,duplicate,duplicate" {
		t.Fatalf("outcomes %s", got)
	}
	if n := b.ready(t, b.queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
}

// A handler failing twice then succeeding: one effect, acknowledged.
func TestFailTwiceThenSucceed(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	var calls atomic.Int32
	var rec recorder
	cfg := b.config()
	cfg.Hooks.AfterSettle = rec.add
	s := start(t, b, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.effect(ctx, tx, m); err != nil {
			return err
		}
		if calls.Add(1) <= 2 {
			return errors.New("provider unavailable")
		}
		return nil
	}, cfg)
	b.publish(t, ev)
	waitFor(t, "the ack", 30*time.Second, func() bool { return rec.count(rabbitsub.ActionAck) == 1 })
	stop(t, s)
	if n := b.ready(t, b.queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	got := rec.list()
	if len(got) != 3 || got[0].Action != rabbitsub.ActionRetry || got[1].Action != rabbitsub.ActionRetry ||
		got[2].Action != rabbitsub.ActionAck || got[0].Delivery != 1 || got[1].Delivery != 2 || got[2].Delivery != 3 {
		t.Fatalf("settlements %s %+v, want retry, retry, ack on deliveries 1, 2, 3", rec.actions(), got)
	}
	m := got[2].Message
	if m.ID != ev.ID || m.Topic != "orders" || m.Key != "k1" || m.Type != "OrderConfirmed" || m.Delivery != 3 ||
		string(m.Payload) != string(ev.Payload) || m.Headers["correlation-id"] != "c1" || len(m.Headers) != 1 ||
		!m.CreatedAt.Equal(ev.CreatedAt) {
		t.Fatalf("decoded %+v from %+v", m, ev)
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler ran %d times, want 3", c)
	}
}

// Past MaxDeliveries a message is dead-lettered with its error; a permanent
// error and a message without an event ID at once. None leaves an effect.
func TestDeadLetters(t *testing.T) {
	b := setup(t)
	var rec recorder
	cfg := b.config()
	cfg.MaxDeliveries = 3
	cfg.Hooks.AfterSettle = rec.add
	evs := events(2)
	failing, permanent := evs[0], evs[1]
	s := start(t, b, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.effect(ctx, tx, m); err != nil {
			return err
		}
		if m.ID == permanent.ID {
			return inbox.Permanent(errors.New("payload does not parse"))
		}
		return fmt.Errorf("provider exploded on delivery %d", m.Delivery)
	}, cfg)
	b.publish(t, failing, permanent)
	if err := b.ch.PublishWithContext(context.Background(), b.exchange, "orders", false, false,
		amqp.Publishing{Body: []byte("no id")}); err != nil {
		t.Fatal(err)
	}
	dead := b.dead(t, 3)
	byID := map[string]amqp.Delivery{}
	for _, d := range dead {
		byID[d.MessageId] = d
	}
	check := func(id, wantErr string, wantDeliveries int32, wantBody string) {
		t.Helper()
		d, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %q", id)
		}
		h := d.Headers
		if e, _ := h[rabbitsub.HeaderError].(string); !strings.Contains(e, wantErr) || h[rabbitsub.HeaderDeliveries] != wantDeliveries ||
			string(d.Body) != wantBody || h[rabbitsub.HeaderQueue] != b.queue || h[rabbitsub.HeaderRoutingKey] != "orders" {
			t.Fatalf("dead letter for %q: headers %v body %q; want error %q after %d deliveries", id, h, d.Body, wantErr, wantDeliveries)
		}
	}
	check(failing.ID.String(), "provider exploded on delivery 3", 3, string(failing.Payload))
	check(permanent.ID.String(), "payload does not parse", 1, string(permanent.Payload))
	check("", "no MessageId", 1, "no id")
	if byID[failing.ID.String()].Headers["correlation-id"] != "c1" {
		t.Fatal("the dead letter lost the event's headers")
	}
	waitFor(t, "three dead-letter settlements", 10*time.Second, func() bool { return rec.count(rabbitsub.ActionDeadLetter) == 3 })
	stop(t, s)
	if n := b.ready(t, b.queue); n != 0 {
		t.Fatalf("%d messages left in the queue", n)
	}
	if n := b.allEffects(t); n != 0 {
		t.Fatalf("%d effects, want none", n)
	}
}

// Two instances with four handlers each: every effect once.
func TestTwoInstancesShareTheQueue(t *testing.T) {
	b := setup(t)
	evs := events(200)
	var rec recorder
	cfg := b.config()
	cfg.Concurrency = 4
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	start(t, b, b.effect, cfg)
	b.publish(t, evs...)
	waitFor(t, "every message acked", 60*time.Second, func() bool { return rec.count(rabbitsub.ActionAck) >= len(evs) })
	for _, ev := range evs {
		if n := b.effects(t, ev.ID); n != 1 {
			t.Fatalf("event %s: %d effects, want 1", ev.ID, n)
		}
	}
}

// After the connection drops the subscriber dials again and goes on.
func TestReconnects(t *testing.T) {
	b := setup(t)
	px := tcpproxy.Start(t, "127.0.0.1:5672")
	var rec recorder
	var connects atomic.Int32
	cfg := b.config()
	u, err := amqp.ParseURI(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Host+fmt.Sprintf(":%d", u.Port) != "127.0.0.1:5672" {
		t.Skip("the reconnect test proxies the local RabbitMQ only")
	}
	cfg.URL = strings.Replace(cfg.URL, "127.0.0.1:5672", px.Addr, 1)
	cfg.Hooks.AfterSettle = rec.add
	cfg.Hooks.Connected = func() { connects.Add(1) }
	start(t, b, b.effect, cfg)
	evs := events(2)
	b.publish(t, evs[0])
	waitFor(t, "the first ack", 30*time.Second, func() bool { return rec.count(rabbitsub.ActionAck) == 1 })
	px.Cut()
	px.Restore(t)
	waitFor(t, "a second connection", 30*time.Second, func() bool { return connects.Load() >= 2 })
	b.publish(t, evs[1])
	waitFor(t, "the second ack", 30*time.Second, func() bool { return rec.count(rabbitsub.ActionAck) == 2 })
	if n := b.allEffects(t); n != 2 {
		t.Fatalf("%d effects, want 2", n)
	}
}

// Stop lets the in-flight handler finish and acknowledges its message.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	inside, release := make(chan struct{}), make(chan struct{})
	s, err := rabbitsub.New(b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		close(inside)
		<-release
		return b.effect(ctx, tx, m)
	}, b.config())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.publish(t, ev)
	<-inside
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a handler was in flight", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if n := b.ready(t, b.queue); n != 0 {
		t.Fatalf("%d messages back in the queue after Stop", n)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// A Stop whose context ends cancels the handlers' context; the message is
// handed back, not dead-lettered.
func TestHardStopCancelsHandlers(t *testing.T) {
	b := setup(t)
	inside := make(chan struct{})
	var rec recorder
	cfg := b.config()
	cfg.MaxDeliveries = 1
	cfg.Hooks.AfterSettle = rec.add
	s, err := rabbitsub.New(b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		close(inside)
		<-ctx.Done()
		return ctx.Err()
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.publish(t, events(1)...)
	<-inside
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline", err)
	}
	if got := rec.list(); len(got) != 1 || got[0].Action != rabbitsub.ActionRequeue {
		t.Fatalf("settlements %+v, want one requeue", got)
	}
	if n := b.ready(t, b.queue); n != 1 {
		t.Fatalf("%d messages in the queue, want the requeued one", n)
	}
}

func TestConfigChecks(t *testing.T) {
	b := setup(t)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]rabbitsub.Config{
		"no queue":          {DeadLetterRoutingKey: "d"},
		"no dead letters":   {Queue: "q"},
		"dead is the queue": {Queue: "q", DeadLetterRoutingKey: "q"},
		"bad url":           {URL: "http://x", Queue: "q", DeadLetterRoutingKey: "d"},
		"negative max":      {Queue: "q", DeadLetterRoutingKey: "d", MaxDeliveries: -1},
		"backoff min > max": {Queue: "q", DeadLetterRoutingKey: "d", Backoff: rabbitsub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"concurrency":       {Queue: "q", DeadLetterRoutingKey: "d", Concurrency: -1},
	} {
		if _, err := rabbitsub.New(b.in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	cfg := b.config()
	cfg.Queue = b.queue + "-missing"
	s, err := rabbitsub.New(b.in, nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start on a missing queue succeeded")
	}
}
