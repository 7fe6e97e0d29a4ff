package subscribertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
)

// testDelivery: the handler gets the event as published; its effect commits,
// AfterCommit reports it handled before AfterSettle reports the ack, and
// the broker holds nothing afterwards.
func testDelivery(t *testing.T, h Harness) {
	f := setup(t, h)
	ev := events(1)[0]
	got := make(chan inbox.Message, 1)
	var rec recorder
	c := rec.hook(f.config("delivery"))
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		select {
		case got <- m:
		default:
		}
		return f.effect(ctx, tx, m)
	}
	s := f.start(c)
	f.Publish(t, ev)
	m := waitChan(t, "the handler", got)
	if m.ID != ev.ID || m.Topic != "orders" || m.Key != "k1" || m.Type != "OrderConfirmed" || string(m.Payload) != string(ev.Payload) ||
		!maps.Equal(m.Headers, ev.Headers) || !m.CreatedAt.Equal(ev.CreatedAt) || m.Delivery != 1 {
		t.Fatalf("handler got %+v\nfrom %+v", m, ev)
	}
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	f.stop(s)
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	want := []string{"commit " + ev.ID.String() + " handled", "settle " + ev.ID.String() + " ack"}
	if got := rec.events(); !equal(got, want) {
		t.Fatalf("hooks %q, want %q", got, want)
	}
	if st := rec.list()[0]; st.Delivery != 1 || st.Outcome != inbox.Handled || st.Err != nil || st.Message.ID != ev.ID {
		t.Fatalf("settlement %+v", st)
	}
	if n := f.held("delivery"); n != 0 {
		t.Fatalf("the broker holds %d messages after the ack", n)
	}
}

// testDuplicateHasOneEffect: the same event stored three times (a relay
// republished it) runs the handler once; the copies are acknowledged as
// duplicates, each after its AfterCommit.
func testDuplicateHasOneEffect(t *testing.T, h Harness) {
	f := setup(t, h)
	ev := events(1)[0]
	f.Publish(t, ev, ev, ev)
	var calls atomic.Int32
	var rec recorder
	c := rec.hook(f.config("dedup"))
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		calls.Add(1)
		return f.effect(ctx, tx, m)
	}
	s := f.start(c)
	waitFor(t, "three acks", func() bool { return rec.count(subscribers.ActionAck) == 3 })
	f.stop(s)
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
	id := ev.ID.String()
	want := []string{"commit " + id + " handled", "settle " + id + " ack", "commit " + id + " duplicate", "settle " + id + " ack",
		"commit " + id + " duplicate", "settle " + id + " ack"}
	if got := rec.events(); !equal(got, want) {
		t.Fatalf("hooks %q, want %q", got, want)
	}
	if n := f.held("dedup"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testRetryThenSucceed: a handler failing twice, with an error and then a
// panic (which rolls its transaction back like an error), gets the message
// again after the backoff, doubling, and its third delivery commits once.
func testRetryThenSucceed(t *testing.T, h Harness) {
	f := setup(t, h)
	ev := events(1)[0]
	var calls atomic.Int32
	var rec recorder
	c := rec.hook(f.config("retry"))
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := f.effect(ctx, tx, m); err != nil {
			return err
		}
		switch calls.Add(1) {
		case 1:
			return fmt.Errorf("%w on delivery %d", errFailing, m.Delivery)
		case 2:
			panic(fmt.Sprintf("boom on delivery %d", m.Delivery))
		}
		return nil
	}
	s := f.start(c)
	f.Publish(t, ev)
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	f.stop(s)
	got := rec.list()
	if len(got) != 3 {
		t.Fatalf("settlements %s, want retry, retry, ack", rec.actions())
	}
	for i, st := range got {
		want := []subscribers.Action{subscribers.ActionRetry, subscribers.ActionRetry, subscribers.ActionAck}[i]
		if st.Action != want || st.Delivery != i+1 || st.Message.Delivery != i+1 || st.Message.ID != ev.ID {
			t.Fatalf("settlement %d: %+v, want %s on delivery %d", i, st, want, i+1)
		}
	}
	if !errors.Is(got[0].Err, errFailing) || got[1].Err == nil || !strings.Contains(got[1].Err.Error(), "boom on delivery 2") || got[2].Err != nil {
		t.Fatalf("settlement errors %v, %v, %v", got[0].Err, got[1].Err, got[2].Err)
	}
	if got[0].Delay != backoffMin || got[1].Delay != 2*backoffMin {
		t.Fatalf("retry delays %v then %v, want %v then %v", got[0].Delay, got[1].Delay, backoffMin, 2*backoffMin)
	}
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want 3", n)
	}
	if n := f.held("retry"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testAckAfterCommit: a message is acknowledged only once its transaction
// has committed. A transaction whose commit fails leaves the message to
// come again; at AfterCommit the effect is visible to others and (where
// the broker can tell) the message not yet acknowledged.
func testAckAfterCommit(t *testing.T, h Harness) {
	f := setup(t, h)
	ev := events(1)[0]
	var calls atomic.Int32
	var rec recorder
	inHook, released := make(chan inbox.Message, 1), make(chan struct{})
	rec.onCommit = func(m inbox.Message, o inbox.Outcome) {
		if o == inbox.Handled {
			inHook <- m
			<-released
		}
	}
	c := rec.hook(f.config("commit"))
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := f.effect(ctx, tx, m); err != nil {
			return err
		}
		if calls.Add(1) == 1 {
			return f.failCommit(ctx, tx) // the statement succeeds; the commit will not
		}
		return nil
	}
	s := f.start(c)
	release := releaser(t, released)
	f.Publish(t, ev)
	waitChan(t, "AfterCommit", inHook)
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("at AfterCommit %d effects are visible, want 1 (committed)", n)
	}
	if h.Features.HeldWhileDelivered {
		if n := f.held("commit"); n != 1 {
			t.Fatalf("at AfterCommit the broker holds %d messages, want 1 (not yet acknowledged)", n)
		}
	}
	release()
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	f.stop(s)
	got := rec.list()
	if len(got) != 2 || got[0].Action != subscribers.ActionRetry || got[0].Err == nil || got[0].Outcome != 0 || got[1].Action != subscribers.ActionAck {
		t.Fatalf("settlements %s, want retry (the commit failed), ack", rec.actions())
	}
	if n, m := calls.Load(), f.effects(ev.ID); n != 2 || m != 1 {
		t.Fatalf("the handler ran %d times with %d effects, want 2 runs and 1 effect", n, m)
	}
	if n := f.held("commit"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

func equal(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}
