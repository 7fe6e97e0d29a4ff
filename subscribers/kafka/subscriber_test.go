package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/inbox"
	kafkasub "github.com/outboxgo/outbox/subscribers/kafka"
)

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// The same event published three times: one effect, three commits.
func TestSameMessageThreeTimesOneEffect(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	b.publish(t, ev, ev, ev)
	var rec recorder
	cfg := b.config("dedup")
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	waitFor(t, "three commits", 30*time.Second, func() bool { return rec.count(kafkasub.ActionCommit) == 3 })
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
	if lag := b.lag(t, "dedup"); lag != 0 {
		t.Fatalf("lag %d, want every offset committed", lag)
	}
}

// A handler failing twice then succeeding: one effect, offset committed.
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
	waitFor(t, "the commit", 30*time.Second, func() bool { return rec.count(kafkasub.ActionCommit) == 1 })
	if lag := b.lag(t, "retry"); lag != 0 {
		t.Fatalf("lag %d, want the offset committed", lag)
	}
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	got := rec.list()
	if len(got) != 3 || got[0].Action != kafkasub.ActionRetry || got[1].Action != kafkasub.ActionRetry ||
		got[2].Action != kafkasub.ActionCommit || got[0].Delivery != 1 || got[1].Delivery != 2 || got[2].Delivery != 3 {
		t.Fatalf("settlements %+v, want retry, retry, commit on deliveries 1, 2, 3", got)
	}
	if got[1].RetryDelay < got[0].RetryDelay/2 {
		t.Fatalf("retry delays %v then %v, want growing", got[0].RetryDelay, got[1].RetryDelay)
	}
	m := got[2].Message
	if m.ID != ev.ID || m.Topic != "orders" || m.Key != "k1" || m.Type != "OrderConfirmed" || m.Delivery != 3 ||
		string(m.Payload) != string(ev.Payload) || m.Headers["correlation-id"] != "c1" || len(m.Headers) != 1 ||
		!m.CreatedAt.Equal(ev.CreatedAt) {
		t.Fatalf("decoded %+v from %+v", m, ev)
	}
}

// Past MaxDeliveries a record is dead-lettered with its error; a permanent
// error and a record without an event ID at once. None leaves an effect.
func TestDeadLetters(t *testing.T) {
	b := setup(t)
	var rec recorder
	cfg := b.config("dlq")
	cfg.MaxDeliveries = 3
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
	b.produce(t, &kgo.Record{Topic: b.topic(), Key: []byte("k1"), Value: []byte("no id")})
	dead := b.deadLetters(t, 3)
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	byID := map[string]*kgo.Record{}
	for _, r := range dead {
		byID[header(r, "Outbox-Id")] = r
	}
	check := func(id, wantErr, wantDeliveries, wantValue string) {
		t.Helper()
		r, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %q", id)
		}
		if !strings.Contains(header(r, kafkasub.HeaderError), wantErr) || header(r, kafkasub.HeaderDeliveries) != wantDeliveries ||
			string(r.Value) != wantValue || string(r.Key) != "k1" || header(r, kafkasub.HeaderTopic) != b.topic() ||
			header(r, kafkasub.HeaderGroup) != "dlq" {
			t.Fatalf("dead letter for %q: headers %v value %q; want error %q after %s deliveries", id, r.Headers, r.Value, wantErr, wantDeliveries)
		}
	}
	check(failing.ID.String(), "provider exploded on delivery 3", "3", string(failing.Payload))
	check(permanent.ID.String(), "payload does not parse", "1", string(permanent.Payload))
	check("", "no Outbox-Id", "1", "no id")
	if header(byID[failing.ID.String()], "correlation-id") != "c1" {
		t.Fatal("the dead letter lost the event's headers")
	}
	waitFor(t, "three dead-letter settlements", 10*time.Second, func() bool { return rec.count(kafkasub.ActionDeadLetter) == 3 })
	if lag := b.lag(t, "dlq"); lag != 0 {
		t.Fatalf("lag %d, want every offset committed", lag)
	}
	if n := b.allEffects(t); n != 0 {
		t.Fatalf("%d effects, want none", n)
	}
}

// A second subscriber of the group resumes from the committed offsets.
func TestResumesFromCommittedOffsets(t *testing.T) {
	b := setup(t)
	evs := events(20)
	var first recorder
	cfg := b.config("resume")
	cfg.Hooks.AfterSettle = first.add
	s := start(t, b, b.effect, cfg)
	b.publish(t, evs[:10]...)
	waitFor(t, "ten commits", 30*time.Second, func() bool { return first.count(kafkasub.ActionCommit) == 10 })
	stop(t, s)
	var second recorder
	cfg.Hooks.AfterSettle = second.add
	start(t, b, b.effect, cfg)
	b.publish(t, evs[10:]...)
	waitFor(t, "ten more commits", 30*time.Second, func() bool { return second.count(kafkasub.ActionCommit) >= 10 })
	for _, st := range second.list() {
		if st.Outcome != inbox.Handled {
			t.Fatalf("the second subscriber read %+v again", st)
		}
	}
	if n := b.allEffects(t); n != 20 {
		t.Fatalf("%d effects, want 20", n)
	}
}

// Stop lets the in-flight handler finish and commits its offset.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	inside, release := make(chan struct{}), make(chan struct{})
	s, err := kafkasub.New(b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	if lag := b.lag(t, "stop"); lag != 0 {
		t.Fatalf("lag %d after Stop, want the offset committed", lag)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// A Stop whose context ends cancels the handlers' context; the record is
// abandoned (not committed), not dead-lettered.
func TestHardStopCancelsHandlers(t *testing.T) {
	b := setup(t)
	inside := make(chan struct{})
	var rec recorder
	cfg := b.config("hard")
	cfg.MaxDeliveries = 1
	cfg.Hooks.AfterSettle = rec.add
	s, err := kafkasub.New(b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	if got := rec.list(); len(got) != 1 || got[0].Action != kafkasub.ActionAbandon {
		t.Fatalf("settlements %+v, want one abandon", got)
	}
	if lag := b.lag(t, "hard"); lag != 1 {
		t.Fatalf("lag %d, want the abandoned record uncommitted", lag)
	}
}

func TestConfigChecks(t *testing.T) {
	b := setup(t)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]kafkasub.Config{
		"no topics":         {Group: "g", DeadLetterTopic: "d"},
		"no group":          {Topics: []string{"t"}, DeadLetterTopic: "d"},
		"no dead letters":   {Topics: []string{"t"}, Group: "g"},
		"dead is read":      {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "t"},
		"negative max":      {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d", MaxDeliveries: -1},
		"backoff min > max": {Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d", Backoff: kafkasub.Backoff{Min: time.Second, Max: time.Millisecond}},
	} {
		if _, err := kafkasub.New(b.in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}
