package subscribertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
)

// redeliverAfter is the silence after which a broker that Redelivers gives
// a message to another consumer, in the cases that count on it.
const redeliverAfter = time.Second

// testOrphan: messages a consumer took and died with come to the next
// subscriber of the group. One of them the dead consumer had committed
// (it died between commit and ack): its redelivery is a duplicate, the
// handler does not run for it. The other is handled once.
func testOrphan(t *testing.T, h Harness) { orphan(t, h, 0) }

// testOrphanPastMaxDeliveries: with MaxDeliveries 1, the redeliveries of
// a dead consumer's messages are past it: the handler does not run again;
// the one committed is acknowledged as a duplicate, the other
// dead-lettered (Features.CountsDeliveries).
func testOrphanPastMaxDeliveries(t *testing.T, h Harness) {
	if !h.Features.CountsDeliveries {
		t.Skip("the broker does not count the deliveries to a consumer that died")
	}
	orphan(t, h, 1)
}

func orphan(t *testing.T, h Harness, maxDeliveries int) {
	f := setup(t, h)
	if f.Orphan == nil {
		t.Skip("Env.Orphan is nil")
	}
	evs := events(2)
	committed, taken := evs[0], evs[1]
	exhausted := maxDeliveries == 1
	var rec recorder
	c := rec.hook(f.config("orphan"))
	c.RedeliverAfter = redeliverAfter
	c.Options.MaxDeliveries = maxDeliveries
	f.Publish(t, evs...)
	f.Orphan(t, c, len(evs))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if o, err := f.in.Handle(ctx, inbox.Message{ID: committed.ID, Topic: "orders", Key: "k1"}, f.effect); o != inbox.Handled || err != nil {
		t.Fatalf("the dead consumer's transaction: %v, %v", o, err)
	}
	var ran sync.Map
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		ran.Store(m.ID, true)
		return f.effect(ctx, tx, m)
	}
	s := f.start(c)
	waitFor(t, "both messages settled", func() bool { return rec.count(subscribers.ActionAck)+rec.count(subscribers.ActionDeadLetter) == 2 })
	f.stop(s)
	for _, st := range rec.list() {
		switch {
		case st.Message.ID == committed.ID && (st.Action != subscribers.ActionAck || st.Outcome != inbox.Duplicate):
			t.Fatalf("settlements %s: the committed message settled %+v, want ack of a duplicate", rec.actions(), st)
		case st.Message.ID == taken.ID && !exhausted && (st.Action != subscribers.ActionAck || st.Outcome != inbox.Handled):
			t.Fatalf("settlements %s: the other settled %+v, want ack, handled", rec.actions(), st)
		case st.Message.ID == taken.ID && exhausted && (st.Action != subscribers.ActionDeadLetter || st.Err == nil || st.Delivery != 2):
			t.Fatalf("settlements %s: the other settled %+v, want dead-lettered on delivery 2", rec.actions(), st)
		}
	}
	if _, ok := ran.Load(committed.ID); ok {
		t.Fatal("the handler ran again for the committed message")
	}
	if _, ok := ran.Load(taken.ID); ok == exhausted {
		t.Fatalf("the handler ran %v for the other message past MaxDeliveries %d", ok, maxDeliveries)
	}
	if exhausted {
		if dead := f.DeadLetters(t, 1, timeout); len(dead) != 1 || dead[0].ID != taken.ID.String() || dead[0].Deliveries != 2 || dead[0].Error == "" {
			t.Fatalf("dead letters %+v, want the other message's after 2 deliveries, with its error", dead)
		}
		evs = evs[:1]
	}
	f.onceEach(evs)
	if n := f.held("orphan"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testSlowHandlerKeepsMessage: a handler slower than RedeliverAfter keeps
// its message: another subscriber of the group does not get it meanwhile
// (Features.Redelivers).
func testSlowHandlerKeepsMessage(t *testing.T, h Harness) {
	if !h.Features.Redelivers {
		t.Skip("the broker does not redeliver to a live consumer")
	}
	f := setup(t, h)
	ev := events(1)[0]
	var runs atomic.Int32
	var rec recorder
	c := rec.hook(f.config("slow"))
	c.RedeliverAfter = redeliverAfter
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		runs.Add(1)
		select { // the handler's own duration: outlive RedeliverAfter
		case <-time.After(3 * redeliverAfter):
		case <-ctx.Done():
			return ctx.Err()
		}
		return f.effect(ctx, tx, m)
	}
	s1, s2 := f.start(c), f.start(c)
	f.Publish(t, ev)
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	f.stop(s1)
	f.stop(s2)
	if got := rec.list(); len(got) != 1 || got[0].Delivery != 1 || runs.Load() != 1 {
		t.Fatalf("settlements %s after %d runs, want one ack on delivery 1", rec.actions(), runs.Load())
	}
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if n := f.held("slow"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testOutage: the connection drops while a handler runs; its transaction
// commits meanwhile and its acknowledgement is lost or late. Once the
// broker is reachable again the subscriber goes on by itself: the message
// is not handled twice (a redelivery is a duplicate), a later message is
// handled, and nothing is left at the broker or dead-lettered.
func testOutage(t *testing.T, h Harness) {
	if h.Outage == nil {
		t.Skip("Harness.Outage is nil")
	}
	o := h.Outage(t)
	f := newFixture(t, o.Env)
	evs := events(2)
	g := newGate(evs[0].ID)
	var runs atomic.Int32
	var rec recorder
	c := rec.hook(f.config("outage"))
	c.Handler = g.wrap(func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		runs.Add(1)
		return f.effect(ctx, tx, m)
	})
	s := f.start(c)
	release := releaser(t, g.released)
	f.Publish(t, evs[0])
	waitChan(t, "the handler", g.inside)
	o.Cut()
	restored := false
	t.Cleanup(func() {
		if !restored {
			o.Restore(t)
		}
	})
	release()
	waitFor(t, "the commit during the outage", func() bool { return f.effects(evs[0].ID) == 1 })
	o.Restore(t)
	restored = true
	f.Publish(t, evs[1])
	waitFor(t, "the later message's effect", func() bool { return f.effects(evs[1].ID) == 1 })
	waitFor(t, "the broker to hold nothing", func() bool { return f.held("outage") == 0 })
	f.stop(s)
	f.onceEach(evs)
	if n := f.held("outage"); n != 0 {
		t.Fatalf("after Stop the broker holds %d messages", n)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (a redelivery after the lost ack is a duplicate)", n)
	}
	for _, st := range rec.list() {
		if st.Action == subscribers.ActionDeadLetter {
			t.Fatalf("dead-lettered during the outage: %+v", st)
		}
	}
}

// testStopDuringOutage: a graceful Stop while the broker is unreachable
// returns within its context — the handler in flight finishes and commits,
// nothing is dead-lettered — and once the broker is back a new subscriber
// handles every message exactly once. (The NATS subscriber's Stop used to
// wait ~20 s on a drain the server could not answer.)
func testStopDuringOutage(t *testing.T, h Harness) {
	if h.Outage == nil {
		t.Skip("Harness.Outage is nil")
	}
	o := h.Outage(t)
	f := newFixture(t, o.Env)
	evs := events(3)
	f.Publish(t, evs...)
	g := newGate(evs[0].ID)
	var rec recorder
	c := rec.hook(f.config("stop-outage"))
	c.Handler = g.wrap(func(ctx context.Context, tx pgx.Tx, m inbox.Message) error { return f.effect(ctx, tx, m) })
	s := f.newSub(c)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	cancel()
	release := releaser(t, g.released)
	waitChan(t, "the handler", g.inside)
	o.Cut()
	restored := false
	t.Cleanup(func() {
		if !restored {
			o.Restore(t)
		}
	})
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- s.Stop(ctx)
	}()
	release()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop during the outage: %v", err)
		}
	case <-time.After(timeout):
		t.Fatalf("Stop during the outage has not returned after %v (its context was 10 s)", timeout)
	}
	if n := f.effects(evs[0].ID); n != 1 {
		t.Fatalf("the handler in flight at Stop: %d effects, want 1", n)
	}
	for _, st := range rec.list() {
		if st.Action == subscribers.ActionDeadLetter {
			t.Fatalf("dead-lettered during the outage: %+v", st)
		}
	}
	o.Restore(t)
	restored = true
	c2 := f.config("stop-outage")
	s2 := f.start(c2)
	waitFor(t, "every message handled", func() bool {
		for _, ev := range evs {
			if f.effects(ev.ID) == 0 {
				return false
			}
		}
		return true
	})
	f.stop(s2)
	f.onceEach(evs)
}
