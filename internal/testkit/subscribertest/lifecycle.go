package subscribertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
)

// testResume: a subscriber started after another of its group stopped
// goes on where it stopped: nothing is handled twice or skipped.
func testResume(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(20)
	var first, second recorder
	s := f.start(first.hook(f.config("resume")))
	f.Publish(t, evs[:10]...)
	waitFor(t, "ten acks", func() bool { return first.count(subscribers.ActionAck) == 10 })
	f.stop(s)
	f.Publish(t, evs[10:]...)
	s = f.start(second.hook(f.config("resume")))
	waitFor(t, "ten more acks", func() bool { return second.count(subscribers.ActionAck) == 10 })
	f.stop(s)
	for _, st := range second.list() {
		if st.Outcome != inbox.Handled || index(evs, st.Message.ID) < 10 {
			t.Fatalf("the second subscriber got %+v", st)
		}
	}
	f.onceEach(evs)
	if n := f.held("resume"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testGracefulStop: Stop waits for the in-flight handler and acknowledges
// its message before it returns; a message that arrived meanwhile is not
// started, and stays at the broker.
func testGracefulStop(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(2)
	g := newGate(evs[0].ID)
	c := f.config("stop")
	c.Options.Concurrency = 1
	c.Handler = g.wrap(f.effect)
	s := f.start(c)
	release := releaser(t, g.released)
	f.Publish(t, evs[0])
	waitChan(t, "the handler", g.inside)
	f.Publish(t, evs[1])
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a handler was in flight", err)
	default:
	}
	release()
	if err := waitChan(t, "Stop", stopped); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// No waiting from here: Stop has returned.
	if n, m := f.effects(evs[0].ID), f.effects(evs[1].ID); n != 1 || m != 0 {
		t.Fatalf("after Stop: %d effects of the in-flight message (want 1), %d of the later one (want 0)", n, m)
	}
	f.heldBack("stop", 1, "after Stop (the later message)")
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// testHardStop: a Stop whose context ends cancels the handlers' context
// and returns the context's error; the cut-short message is neither
// acknowledged nor dead-lettered (even with MaxDeliveries 1), and stays at
// the broker.
func testHardStop(t *testing.T, h Harness) {
	f := setup(t, h)
	inside := make(chan struct{})
	var rec recorder
	c := rec.hook(f.config("hard"))
	c.Options.MaxDeliveries = 1
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		close(inside)
		<-ctx.Done()
		return ctx.Err()
	}
	s := f.start(c)
	f.Publish(t, events(1)...)
	waitChan(t, "the handler", inside)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the deadline", err)
	}
	got := rec.list()
	if len(got) != 1 || got[0].Action == subscribers.ActionAck || got[0].Action == subscribers.ActionDeadLetter || !errors.Is(got[0].Err, context.Canceled) {
		t.Fatalf("settlements %s, want one handing the message back", rec.actions())
	}
	if ids, _ := f.effectOrder(); len(ids) != 0 {
		t.Fatalf("%d effects from a cancelled handler", len(ids))
	}
	f.heldBack("hard", 1, "after a hard Stop (the cut-short message)")
}

// testRunUntilCancelled: Run handles messages until its context ends, then
// stops gracefully and returns nil.
func testRunUntilCancelled(t *testing.T, h Harness) {
	f := setup(t, h)
	ev := events(1)[0]
	var rec recorder
	s := f.newSub(rec.hook(f.config("run")))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("Run at cleanup: %v", err)
			}
		case <-time.After(timeout):
			t.Error("Run did not return at cleanup")
		}
	})
	f.Publish(t, ev)
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	cancel()
	if err := waitChan(t, "Run to return", ran); err != nil {
		t.Fatalf("Run = %v, want nil after its context ended", err)
	}
	ran <- nil // for the cleanup
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	if n := f.held("run"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}

// testLifecycle: New refuses a nil inbox or handler; Stop before Start and
// a second Stop are no-ops; a second Start, and a Start after Stop, fail.
func testLifecycle(t *testing.T, h Harness) {
	f := setup(t, h)
	for name, c := range map[string]Config{
		"nil handler": {Inbox: f.in, Group: "g"},
		"nil inbox":   {Handler: f.effect, Group: "g"},
	} {
		if _, err := f.New(t, c); err == nil {
			t.Errorf("New with a %s succeeded", name)
		}
	}
	var rec recorder
	s := f.newSub(rec.hook(f.config("life")))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start after a Stop before Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if err := s.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}
	ev := events(1)[0]
	f.Publish(t, ev)
	waitFor(t, "the ack", func() bool { return rec.count(subscribers.ActionAck) == 1 })
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Start(ctx); err == nil {
		t.Fatal("Start after Stop succeeded")
	}
	if n := f.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}
