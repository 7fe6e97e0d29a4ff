package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/inbox"
	redissub "github.com/outboxgo/outbox/subscribers/redis"
)

// The same event added three times: one effect, three acks.
func TestSameMessageThreeTimesOneEffect(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	b.publish(t, ev, ev, ev)
	var rec recorder
	cfg := b.config("dedup")
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	waitFor(t, "three acks", 30*time.Second, func() bool { return rec.count(redissub.ActionAck) == 3 })
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
	if !b.settled(t, "dedup") {
		t.Fatal("entries left pending")
	}
}

// A handler failing twice then succeeding: one effect, acknowledged.
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
	waitFor(t, "the ack", 30*time.Second, func() bool { return rec.count(redissub.ActionAck) == 1 })
	if !b.settled(t, "retry") {
		t.Fatal("entry left pending")
	}
	if n := b.effects(t, ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	got := rec.list()
	if len(got) != 3 || got[0].Action != redissub.ActionRetry || got[1].Action != redissub.ActionRetry ||
		got[2].Action != redissub.ActionAck || got[0].Delivery != 1 || got[1].Delivery != 2 || got[2].Delivery != 3 {
		t.Fatalf("settlements %+v, want retry, retry, ack on deliveries 1, 2, 3", got)
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

// Past MaxDeliveries an entry is dead-lettered with its error; a permanent
// error and an entry without an event ID at once. None leaves an effect.
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
	if err := b.rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: b.stream(), Values: []any{"payload", "no id"}}).Err(); err != nil {
		t.Fatal(err)
	}
	var dead []goredis.XMessage
	waitFor(t, "three dead letters", 30*time.Second, func() bool {
		var err error
		dead, err = b.rdb.XRange(context.Background(), b.deadStream(), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(dead) >= 3
	})
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	byID := map[string]goredis.XMessage{}
	for _, m := range dead {
		id, _ := m.Values["id"].(string)
		byID[id] = m
	}
	check := func(id, wantErr, wantDeliveries, wantPayload string) {
		t.Helper()
		m, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %q", id)
		}
		v := m.Values
		if s, _ := v[redissub.FieldError].(string); !strings.Contains(s, wantErr) || v[redissub.FieldDeadDeliveries] != wantDeliveries ||
			v["payload"] != wantPayload || v[redissub.FieldDeadStream] != b.stream() || v[redissub.FieldDeadGroup] != "dlq" {
			t.Fatalf("dead letter for %q: %v; want error %q after %s deliveries", id, v, wantErr, wantDeliveries)
		}
	}
	check(failing.ID.String(), "provider exploded on delivery 3", "3", string(failing.Payload))
	check(permanent.ID.String(), "payload does not parse", "1", string(permanent.Payload))
	check("", "no id field", "1", "no id")
	if !strings.Contains(byID[failing.ID.String()].Values["headers"].(string), "c1") {
		t.Fatal("the dead letter lost the event's headers")
	}
	waitFor(t, "nothing pending", 10*time.Second, func() bool { return b.settled(t, "dlq") })
	if n := b.allEffects(t); n != 0 {
		t.Fatalf("%d effects, want none", n)
	}
	if n := rec.count(redissub.ActionDeadLetter); n != 3 {
		t.Fatalf("%d dead-letter settlements, want 3", n)
	}
}

// Two instances in one group, four handlers each: every effect once.
func TestTwoInstancesShareTheGroup(t *testing.T) {
	b := setup(t)
	evs := events(200)
	var rec recorder
	cfg := b.config("shared")
	cfg.Concurrency = 4
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	start(t, b, b.effect, cfg)
	b.publish(t, evs...)
	waitFor(t, "every entry acked", 60*time.Second, func() bool { return rec.count(redissub.ActionAck) >= len(evs) })
	if !b.settled(t, "shared") {
		t.Fatal("entries left pending")
	}
	for _, ev := range evs {
		if n := b.effects(t, ev.ID); n != 1 {
			t.Fatalf("event %s: %d effects, want 1", ev.ID, n)
		}
	}
}

// An entry left pending by a consumer that died is claimed by another
// instance after ClaimIdle, and handled once.
func TestCrashedConsumersEntryIsClaimed(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	b.publish(t, ev)
	ctx := context.Background()
	if err := b.rdb.XGroupCreateMkStream(ctx, b.stream(), "crash", "0").Err(); err != nil {
		t.Fatal(err)
	}
	// A consumer reads the entry and dies.
	if err := b.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "crash", Consumer: "dead",
		Streams: []string{b.stream(), ">"}, Count: 1, Block: -1}).Err(); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	cfg := b.config("crash")
	cfg.ClaimIdle = 200 * time.Millisecond
	cfg.Hooks.AfterSettle = rec.add
	start(t, b, b.effect, cfg)
	waitFor(t, "the ack", 30*time.Second, func() bool { return rec.count(redissub.ActionAck) == 1 })
	if got := rec.list()[0]; got.Delivery != 2 || got.Outcome != inbox.Handled {
		t.Fatalf("settlement %+v, want handled on delivery 2", got)
	}
	if n := b.effects(t, ev.ID); n != 1 || !b.settled(t, "crash") {
		t.Fatalf("%d effects, settled %v", n, b.settled(t, "crash"))
	}
}

// Stop lets the in-flight handler finish and acknowledges its entry.
func TestGracefulStopFinishesInFlight(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	inside, release := make(chan struct{}), make(chan struct{})
	s, err := redissub.New(b.rdb, b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	if !b.settled(t, "stop") {
		t.Fatal("entry pending after Stop")
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// A Stop whose context ends cancels the handlers' context; the entry is
// released, not dead-lettered.
func TestHardStopCancelsHandlers(t *testing.T) {
	b := setup(t)
	inside := make(chan struct{})
	var rec recorder
	cfg := b.config("hard")
	cfg.MaxDeliveries = 1
	cfg.Hooks.AfterSettle = rec.add
	s, err := redissub.New(b.rdb, b.in, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	if got := rec.list(); len(got) != 1 || got[0].Action != redissub.ActionRelease {
		t.Fatalf("settlements %+v, want one release", got)
	}
	if b.settled(t, "hard") {
		t.Fatal("the released entry was acknowledged")
	}
}

func TestConfigChecks(t *testing.T) {
	b := setup(t)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]redissub.Config{
		"no streams":        {Group: "g", DeadLetterStream: "d"},
		"no group":          {Streams: []string{"s"}, DeadLetterStream: "d"},
		"no dead letters":   {Streams: []string{"s"}, Group: "g"},
		"dead is read":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "s"},
		"negative max":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", MaxDeliveries: -1},
		"backoff > idle":    {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", ClaimIdle: time.Second, Backoff: redissub.Backoff{Min: time.Second, Max: time.Minute}},
		"backoff min > max": {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Backoff: redissub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"concurrency":       {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Concurrency: -1},
	} {
		if _, err := redissub.New(b.rdb, b.in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}

// A handler slower than ClaimIdle keeps its entry: the keep-alive stops a
// second instance from claiming it.
func TestSlowHandlerIsKeptAlive(t *testing.T) {
	b := setup(t)
	ev := events(1)[0]
	var rec recorder
	var runs atomic.Int32
	cfg := b.config("slow")
	cfg.ClaimIdle = 150 * time.Millisecond
	cfg.Backoff = redissub.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}
	cfg.Hooks.AfterSettle = rec.add
	h := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		runs.Add(1)
		select { // outlive ClaimIdle several times over
		case <-time.After(5 * cfg.ClaimIdle):
		case <-ctx.Done():
			return ctx.Err()
		}
		return b.effect(ctx, tx, m)
	}
	s1, s2 := start(t, b, h, cfg), start(t, b, h, cfg)
	b.publish(t, ev)
	waitFor(t, "the ack", 30*time.Second, func() bool { return rec.count(redissub.ActionAck) >= 1 })
	for _, s := range []*redissub.Subscriber[pgx.Tx]{s1, s2} { // every delivery settled
		if err := s.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.list(); len(got) != 1 || got[0].Delivery != 1 || runs.Load() != 1 {
		t.Fatalf("settlements %+v after %d runs, want one ack on delivery 1", got, runs.Load())
	}
	if n := b.effects(t, ev.ID); n != 1 || !b.settled(t, "slow") {
		t.Fatalf("%d effects, settled %v", n, b.settled(t, "slow"))
	}
}
