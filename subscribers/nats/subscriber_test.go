package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/natstest"
	natspub "github.com/outboxgo/outbox/publishers/nats"
	natssub "github.com/outboxgo/outbox/subscribers/nats"
)

// The same event stored three times in the stream (a relay re-published it
// after JetStream's duplicate window): one effect, three acks.
func TestSameMessageThreeTimesOneEffect(t *testing.T) {
	b := setup(t)
	// A stream with the shortest duplicate window, so the copies are kept.
	name := natstest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
		Duplicates: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.js.DeleteStream(context.Background(), name) })
	b.stream, b.prefix = name, name

	ev := events(1)[0]
	stored := 0
	waitFor(t, "three copies stored", 20*time.Second, func() bool {
		m := &nats.Msg{Subject: name + ".orders", Data: ev.Payload, Header: nats.Header{}}
		m.Header.Set(natspub.HeaderMsgID, ev.ID.String())
		m.Header.Set(natspub.HeaderType, ev.Type)
		ack, err := b.js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if !ack.Duplicate {
			stored++
		}
		return stored == 3
	})

	var rec recorder
	cfg := b.config("dedup")
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	waitFor(t, "three acks", 30*time.Second, func() bool { return rec.count(natssub.ActionAck) == 3 })
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
	waitFor(t, "the consumer to hold nothing", 10*time.Second, func() bool { return b.settled(t, "dedup") })
}

// A handler failing twice then succeeding: one effect, and the message is
// acknowledged (nothing pending, nothing redelivered afterwards).
func TestFailTwiceThenSucceed(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	var calls atomic.Int32
	var rec recorder
	cfg := b.config("retry")
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.effect(ctx, tx, m); err != nil {
			return err
		}
		if calls.Add(1) <= 2 {
			return errors.New("provider unavailable")
		}
		return nil
	}, cfg)
	b.publish(t, ev)
	waitFor(t, "the ack", 30*time.Second, func() bool { return rec.count(natssub.ActionAck) == 1 })
	waitFor(t, "the consumer to hold nothing", 10*time.Second, func() bool { return b.settled(t, "retry") })
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	got := rec.list()
	if len(got) != 3 || got[0].Action != natssub.ActionNak || got[1].Action != natssub.ActionNak || got[2].Delivery != 3 {
		t.Fatalf("settlements %+v, want nak, nak, ack on delivery 3", got)
	}
	if got[1].NakDelay < got[0].NakDelay {
		t.Fatalf("nak delays %v then %v, want growing", got[0].NakDelay, got[1].NakDelay)
	}
	m := got[2].Message
	if m.ID != ev.ID || m.Topic != "orders" || m.Key != "k1" || m.Type != "OrderConfirmed" ||
		string(m.Payload) != string(ev.Payload) || m.Headers["correlation-id"] != "c1" || len(m.Headers) != 1 ||
		!m.CreatedAt.Equal(ev.CreatedAt) {
		t.Fatalf("decoded %+v from %+v", m, ev)
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler ran %d times, want 3", c)
	}
}

// A message that keeps failing goes to the dead-letter subject after
// MaxDeliver deliveries, with its error; a permanent error and a message
// without an event ID go there at once. None leaves an effect.
func TestDeadLetters(t *testing.T) {
	b := setup(t)
	var rec recorder
	cfg := b.config("dlq")
	cfg.MaxDeliver = 3
	cfg.Hooks.AfterSettle = rec.add
	evs := events(2)
	failing, permanent := evs[0], evs[1]
	start(t, b, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := b.effect(ctx, tx, m); err != nil {
			return err
		}
		if m.ID == permanent.ID {
			return inbox.Permanent(errors.New("payload does not parse"))
		}
		return fmt.Errorf("provider exploded on delivery %d", m.Delivery)
	}, cfg)
	b.publish(t, failing, permanent)
	if _, err := b.js.Publish(context.Background(), b.prefix+".orders", []byte("no id")); err != nil {
		t.Fatal(err)
	}

	dead := natstest.WaitForCount(t, b.js, b.dlStr, 3, 30*time.Second)
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	byID := map[string]jetstream.Msg{}
	for _, m := range dead {
		byID[m.Headers().Get(natssub.HeaderOriginalMsgID)] = m
	}
	check := func(id, wantErr, wantDeliveries, wantData string) {
		t.Helper()
		m, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %q", id)
		}
		h := m.Headers()
		if !strings.Contains(h.Get(natssub.HeaderError), wantErr) || h.Get(natssub.HeaderDeliveries) != wantDeliveries ||
			string(m.Data()) != wantData || h.Get(natssub.HeaderSubject) != b.prefix+".orders" ||
			h.Get(natssub.HeaderConsumer) != "dlq" || h.Get(natssub.HeaderStream) != b.stream {
			t.Fatalf("dead letter for %q: headers %v data %q; want error %q after %s deliveries", id, h, m.Data(), wantErr, wantDeliveries)
		}
	}
	check(failing.ID.String(), "provider exploded on delivery 3", "3", string(failing.Payload))
	check(permanent.ID.String(), "payload does not parse", "1", string(permanent.Payload))
	check("", "no Nats-Msg-Id", "1", "no id")
	if byID[failing.ID.String()].Headers().Get("correlation-id") != "c1" {
		t.Fatal("the dead letter lost the event's headers")
	}
	waitFor(t, "the consumer to hold nothing", 10*time.Second, func() bool { return b.settled(t, "dlq") })
	if n := len(b.effectCounts(t)); n != 0 {
		t.Fatalf("%d effects, want none", n)
	}
	if n := rec.count(natssub.ActionDeadLetter); n != 3 {
		t.Fatalf("%d dead-letter settlements, want 3", n)
	}
}

// Two instances on one durable consumer: every message's effect once.
func TestTwoInstancesShareTheDurable(t *testing.T) {
	b := setup(t)
	evs := events(300)
	var rec recorder
	cfg := b.config("shared")
	cfg.Concurrency = 4
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	start(t, b, b.effect, cfg)
	b.publish(t, evs...)
	waitFor(t, "every message acked", 60*time.Second, func() bool { return rec.count(natssub.ActionAck) >= len(evs) })
	waitFor(t, "the consumer to hold nothing", 10*time.Second, func() bool { return b.settled(t, "shared") })
	counts := b.effectCounts(t)
	for _, ev := range evs {
		if counts[ev.ID] != 1 {
			t.Fatalf("event %s: %d effects, want 1", ev.ID, counts[ev.ID])
		}
	}
	if len(counts) != len(evs) {
		t.Fatalf("%d events with effects, want %d", len(counts), len(evs))
	}
}

// Stop lets the in-flight handler finish and acknowledges its message.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	inside, release := make(chan struct{}), make(chan struct{})
	s, err := natssub.New(b.js, b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		close(inside)
		<-release
		return b.effect(ctx, tx, m)
	}, b.config("stop"))
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
	if !b.settled(t, "stop") { // the ack was confirmed before Stop returned
		t.Fatalf("after Stop the consumer holds %+v", b.consumerInfo(t, "stop"))
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// A Stop whose context ends cancels the handlers' context.
func TestHardStopCancelsHandlers(t *testing.T) {
	b := setup(t)
	inside := make(chan struct{})
	var rec recorder
	cfg := b.config("hard")
	cfg.MaxDeliver = 1 // a failure would be dead-lettered; a cancellation is not
	cfg.Hooks.AfterSettle = rec.add
	s, err := natssub.New(b.js, b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	if n := len(b.effectCounts(t)); n != 0 {
		t.Fatalf("%d effects from a cancelled handler", n)
	}
	if got := rec.list(); len(got) != 1 || got[0].Action != natssub.ActionNak {
		t.Fatalf("settlements %+v, want one nak (handed back, not dead-lettered)", got)
	}
}

func TestConfigChecks(t *testing.T) {
	b := setup(t)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]natssub.Config{
		"no stream":            {Durable: "d", DeadLetterSubject: "x.y"},
		"no durable":           {Stream: "s", DeadLetterSubject: "x.y"},
		"no dead letters":      {Stream: "s", Durable: "d"},
		"wildcard dead":        {Stream: "s", Durable: "d", DeadLetterSubject: "x.*"},
		"bad filter":           {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", FilterSubjects: []string{"a..b"}},
		"negative deliver":     {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", MaxDeliver: -1},
		"backoff min > max":    {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Backoff: natssub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"negative concurrency": {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Concurrency: -1},
	} {
		if _, err := natssub.New(b.js, b.in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	ctx := context.Background()
	cfg := b.config("checks")
	cfg.DeadLetterSubject = "nobody.captures.this"
	s, err := natssub.New(b.js, b.in, nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "no stream captures") {
		t.Fatalf("Start with an uncaptured dead-letter subject = %v", err)
	}
	cfg = b.config("checks")
	cfg.DeadLetterSubject = b.prefix + ".dead"
	s, err = natssub.New(b.js, b.in, nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "one this consumer reads") {
		t.Fatalf("Start with a dead-letter subject the consumer reads = %v", err)
	}
	cfg.FilterSubjects = []string{b.prefix + ".orders"}
	start(t, b, nop, cfg) // the filter leaves the dead letters out
}
