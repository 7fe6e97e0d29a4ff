package pgcdc

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// downPublisher is a broker that is down: every message fails as
// unavailable. It counts the calls.
type downPublisher struct{ calls atomic.Int64 }

func (p *downPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.calls.Add(1)
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = publishers.Unavailable(errors.New("connection refused"))
	}
	return errs
}

func (p *downPublisher) Close() error { return nil }

// While the broker is down, the stream pauses once the window holds an
// event for the breaker to probe the broker with. After a restart has
// emptied the window, the first event read paused the stream before its
// transaction's commit, which is what woke the dispatcher: a dispatcher
// parked on the empty window, the breaker's wait over, never saw the
// event, and the stream waited for the dispatcher forever — the held
// event was not published once the broker came back
// (TestFastShutdownWhileStuck under load, about one run in sixty, when
// the restart fell on the end of the breaker's wait). Pausing now wakes
// the dispatcher.
func TestPausingOnAnEventWakesTheDispatcher(t *testing.T) {
	pub := &downPublisher{}
	r, err := New(&Config{ConnString: "postgres://127.0.0.1:1/none", Schema: "s", Slot: "s", Publication: "s"}, pub)
	if err != nil {
		t.Fatal(err)
	}
	e := r.eng
	e.mu.Lock()
	e.outages, e.openUntil = 1, time.Now().Add(-time.Second) // down, its wait over
	e.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.dispatch(ctx)
	}()
	defer func() {
		cancel()
		<-done
		e.wg.Wait()
	}()
	waitParked(t, "(*engine).dispatch")

	// The stream reads a transaction's first event, and pauses on it.
	s := &stream{r: r, cur: &txn{xid: 1}}
	e.mu.Lock()
	e.txns = append(e.txns, s.cur)
	e.mu.Unlock()
	ev := &row{msg: outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "k", Payload: []byte{}, CreatedAt: time.Now()}}
	if err := s.insert(ctx, ev); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	paused := e.paused()
	e.mu.Unlock()
	if !paused {
		t.Fatal("the stream does not pause on an event while the broker is down")
	}
	for deadline := time.Now().Add(time.Minute); pub.calls.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the dispatcher did not probe the broker with the event the stream paused on")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitParked waits until a goroutine running fn is blocked in a select.
func waitParked(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(time.Minute); ; {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, fn) && strings.Contains(strings.SplitN(g, "\n", 2)[0], "[select") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine running %s blocked in a select within a minute", fn)
		}
		time.Sleep(time.Millisecond)
	}
}
