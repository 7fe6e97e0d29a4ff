package subscribertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// testOrder: with one handler at a time, the messages of one key are
// handled in the order they were published.
func testOrder(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(20)
	var rec recorder
	c := rec.hook(f.config("order"))
	c.Options.Concurrency = 1
	f.Publish(t, evs...)
	s := f.start(c)
	waitFor(t, "twenty acks", func() bool { return rec.count(subscribers.ActionAck) == len(evs) })
	f.stop(s)
	ids, _ := f.effectOrder()
	if len(ids) != len(evs) {
		t.Fatalf("%d effects, want %d", len(ids), len(evs))
	}
	for i, id := range ids {
		if id != evs[i].ID {
			t.Fatalf("effect %d is message %d's", i, index(evs, id))
		}
	}
}

// testOrderPerKey: at any concurrency the messages of one key are handled
// in the order they were published (Features.OrderPerKey).
func testOrderPerKey(t *testing.T, h Harness) {
	if !h.Features.OrderPerKey {
		t.Skip("the subscriber does not keep a key's order at any concurrency")
	}
	f := setup(t, h)
	evs := events(40)
	for i := range evs {
		evs[i].Key = fmt.Sprintf("k%d", i%4)
	}
	var rec recorder
	c := rec.hook(f.config("keys"))
	c.Options.Concurrency = 4
	f.Publish(t, evs...)
	s := f.start(c)
	waitFor(t, "forty acks", func() bool { return rec.count(subscribers.ActionAck) == len(evs) })
	f.stop(s)
	ids, keys := f.effectOrder()
	last := map[string]int{}
	for i, id := range ids {
		n := index(evs, id)
		if p, ok := last[keys[i]]; ok && n < p {
			t.Fatalf("key %s: message %d handled after message %d", keys[i], n, p)
		}
		last[keys[i]] = n
	}
	f.onceEach(evs)
}

// testConcurrency: Concurrency handlers run at once, and no more.
func testConcurrency(t *testing.T, h Harness) {
	if !h.Features.Concurrency {
		t.Skip("the subscriber has no concurrency knob")
	}
	f := setup(t, h)
	const n = 3
	evs := events(2 * n)
	// A key each: a subscriber may hand a key to one handler at a time
	// (Pub/Sub with ordering keys), and Concurrency is across keys.
	for i := range evs {
		evs[i].Key = fmt.Sprintf("k%d", i)
	}
	var inside, most atomic.Int32
	entered, released := make(chan struct{}, len(evs)), make(chan struct{})
	var rec recorder
	c := rec.hook(f.config("concurrent"))
	c.Options.Concurrency = n
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		now := inside.Add(1)
		defer inside.Add(-1)
		for {
			if old := most.Load(); now <= old || most.CompareAndSwap(old, now) {
				break
			}
		}
		entered <- struct{}{}
		select {
		case <-released:
		case <-ctx.Done():
			return ctx.Err()
		}
		return f.effect(ctx, tx, m)
	}
	s := f.start(c)
	release := releaser(t, released)
	f.Publish(t, evs...)
	for i := range n {
		waitChan(t, fmt.Sprintf("handler %d of %d to run at once", i+1, n), entered)
	}
	release()
	waitFor(t, "every ack", func() bool { return rec.count(subscribers.ActionAck) == len(evs) })
	f.stop(s)
	if m := most.Load(); m != n {
		t.Fatalf("%d handlers ran at once, want %d", m, n)
	}
	f.onceEach(evs)
}

// testSharedGroup: two subscribers of one group share the messages: each
// message's effect once, nothing left at the broker.
func testSharedGroup(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(200)
	for i := range evs {
		evs[i].Key = fmt.Sprintf("k%d", i%8)
	}
	var rec recorder
	c := rec.hook(f.config("shared"))
	c.Options.Concurrency = 2
	s1, s2 := f.start(c), f.start(c)
	f.Publish(t, evs...)
	waitFor(t, "every message acked", func() bool { return handled(rec.list()) == len(evs) })
	f.stop(s1)
	f.stop(s2)
	f.onceEach(evs)
	if n := f.held("shared"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// handled counts the acknowledged settlements whose outcome is Handled.
func handled(sts []subscribers.Settlement) int {
	n := 0
	for _, st := range sts {
		if st.Action == subscribers.ActionAck && st.Outcome == inbox.Handled {
			n++
		}
	}
	return n
}

func index(evs []outbox.Message, id uuid.UUID) int {
	for i, ev := range evs {
		if ev.ID == id {
			return i
		}
	}
	return -1
}
