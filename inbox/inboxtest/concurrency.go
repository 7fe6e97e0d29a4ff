package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox/inbox"
)

type result struct {
	o   inbox.Outcome
	err error
}

// holdFirst starts a delivery of m that applies its effect, then waits in
// its transaction until release is called (at the latest at cleanup), and
// fails if fails. It returns once the delivery holds its record.
func (f fixture[TTx]) holdFirst(t *testing.T, m inbox.Message, fails bool) (release func(), done <-chan result) {
	t.Helper()
	inside, hold, res := make(chan struct{}), make(chan struct{}), make(chan result, 1)
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the Env's cleanups: they run last first
	ctx := ctxT(t)
	go func() {
		o, err := f.in.Handle(ctx, m, func(ctx context.Context, tx TTx, m inbox.Message) error {
			if err := f.Apply(ctx, tx, m); err != nil {
				return err
			}
			close(inside)
			<-hold
			if fails {
				return errors.New("first fails")
			}
			return nil
		})
		res <- result{o, err}
	}()
	select {
	case <-inside:
	case r := <-res:
		t.Fatalf("the first delivery ended early: %v, %v", r.o, r.err)
	}
	return release, res
}

// deliverAsync starts n deliveries of m that apply its effect.
func (f fixture[TTx]) deliverAsync(t *testing.T, m inbox.Message, n int) <-chan result {
	ctx := ctxT(t)
	res := make(chan result, n)
	for range n {
		go func() {
			o, err := f.in.Handle(ctx, m, f.apply)
			res <- result{o, err}
		}()
	}
	return res
}

// waitForWaiting waits until n deliveries wait on the first's record.
func (f fixture[TTx]) waitForWaiting(t *testing.T, n int) {
	t.Helper()
	ctx := ctxT(t)
	waitFor(t, fmt.Sprintf("%d deliveries to wait on the first's record", n), 10*time.Second, func() bool {
		k, err := f.Waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return k == n
	})
}

// A second delivery while the first is still in its transaction waits for
// the first: it is a duplicate when the first commits, and runs the
// handler when the first rolls back.
func testConcurrentDuplicate[TTx any](t *testing.T, h Harness[TTx]) {
	for _, firstFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("FirstFails=%v", firstFails), func(t *testing.T) {
			t.Parallel()
			f := setup(t, h, inbox.Config{})
			if f.Waiting == nil {
				t.Skip("Env.Waiting is nil")
			}
			m := msg()
			release, first := f.holdFirst(t, m, firstFails)
			second := f.deliverAsync(t, m, 1)
			f.waitForWaiting(t, 1)
			select {
			case r := <-second:
				t.Fatalf("the second delivery returned %v, %v before the first ended", r.o, r.err)
			default:
			}
			release()
			r1, r2 := <-first, <-second
			if firstFails {
				if r1.err == nil || r2.err != nil || r2.o != inbox.Handled {
					t.Fatalf("first %v, %v; second %v, %v; want failure, then handled", r1.o, r1.err, r2.o, r2.err)
				}
			} else if r1.err != nil || r1.o != inbox.Handled || r2.err != nil || r2.o != inbox.Duplicate {
				t.Fatalf("first %v, %v; second %v, %v; want handled, then duplicate", r1.o, r1.err, r2.o, r2.err)
			}
			if n := f.effects(t, m.ID); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// Two deliveries wait on a first that rolls back: one of them handles the
// message, the other is a duplicate or (Harness.Transient) fails, and then
// its redelivery is a duplicate. One effect either way.
func testWaitersOnRolledBackFirst[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	if f.Waiting == nil {
		t.Skip("Env.Waiting is nil")
	}
	m := msg()
	release, first := f.holdFirst(t, m, true)
	waiters := f.deliverAsync(t, m, 2)
	f.waitForWaiting(t, 2)
	release()
	if r := <-first; r.err == nil {
		t.Fatalf("the first delivery succeeded: %v", r.o)
	}
	var got []string
	for range 2 {
		r := <-waiters
		switch {
		case r.err == nil:
			got = append(got, r.o.String())
		case h.Transient != nil && h.Transient(r.err):
			got = append(got, "transient")
			if o := handle(t, f.in, m, f.apply); o != inbox.Duplicate {
				t.Fatalf("redelivery after a transient failure = %v; want duplicate", o)
			}
		default:
			t.Fatalf("a waiter failed: %v", r.err)
		}
	}
	sort.Strings(got)
	if s := strings.Join(got, " "); s != "duplicate handled" && s != "handled transient" {
		t.Fatalf("waiters: %s; want one handled, the other a duplicate or a transient failure", s)
	}
	t.Logf("waiters: %v", got)
	if n := f.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// Many deliveries of the same messages at once: each message's effect once.
func testConcurrentDeliveries[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	ctx := ctxT(t)
	msgs := make([]inbox.Message, 20)
	for i := range msgs {
		msgs[i] = msg()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(msgs))
	for range 8 {
		wg.Go(func() {
			for _, m := range msgs {
				if _, err := f.in.Handle(ctx, m, f.apply); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if n := f.effects(t, m.ID); n != 1 {
			t.Fatalf("message %s: %d effects, want 1", m.ID, n)
		}
	}
	if r := len(f.Records(t)); r != len(msgs) {
		t.Fatalf("%d records, want %d", r, len(msgs))
	}
}
