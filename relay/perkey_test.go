package relay

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/orderkeep"
	"github.com/outboxgo/outbox/publishers"
)

// callLog records every Publish call's messages, in call order.
type callLog struct {
	mu    sync.Mutex
	calls [][]outbox.Message
}

func (l *callLog) record(msgs []outbox.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, slices.Clone(msgs))
}

func (l *callLog) get() [][]outbox.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// sentOrder is the order in which key's messages were sent, by ID, over
// every call.
func sentOrder(calls [][]outbox.Message, key string) []uuid.UUID {
	var out []uuid.UUID
	for _, c := range calls {
		for _, m := range c {
			if m.Key == key {
				out = append(out, m.ID)
			}
		}
	}
	return out
}

func idsOf(ms []outbox.Message) []uuid.UUID {
	out := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// One batch takes a key's consecutive events and sends them one per call,
// in order, each after the previous call returned, while another key's
// events share the calls; the whole batch is completed once.
func TestKeyEventsGoOneAtATimeInOneBatch(t *testing.T) {
	r, s, p := newMem(t, Config{Workers: 1})
	var log callLog
	p.set(func(_ context.Context, msgs []outbox.Message) []error {
		log.record(msgs)
		return make([]error, len(msgs))
	})
	a, c, u := msgs(5, "a"), msgs(3, "c"), msgs(2, "")
	s.add(append(append(a, c...), u...)...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 10 })

	calls := log.get()
	for i, call := range calls {
		keys := map[string]int{}
		for _, m := range call {
			if keys[m.Key]++; m.Key != "" && keys[m.Key] > 1 {
				t.Fatalf("call %d sent %d events of key %s at once: %v", i, keys[m.Key], m.Key, call)
			}
		}
	}
	if got := sentOrder(calls, "a"); !slices.Equal(got, idsOf(a)) {
		t.Fatalf("key a sent in order %v, want %v", got, idsOf(a))
	}
	if got := sentOrder(calls, "c"); !slices.Equal(got, idsOf(c)) {
		t.Fatalf("key c sent in order %v, want %v", got, idsOf(c))
	}
	if len(calls) != 5 {
		t.Fatalf("%d publish calls, want 5 (one per event of the deepest key, unkeyed events in the first): %v", len(calls), calls)
	}
	if st := r.Stats(); st.Batches != 1 {
		t.Fatalf("%d batches, want 1: the key's events should share one claim and one completion", st.Batches)
	}
}

// A failed event stops its key for the batch: the events after it are not
// sent and not charged, other keys go on, and the key resumes in order with
// the failed one.
func TestFailedEventDefersTheRestOfItsKey(t *testing.T) {
	r, s, p := newMem(t, Config{Workers: 1, RetryBackoff: outbox.Backoff{Min: time.Millisecond, Max: time.Millisecond}})
	a, c := msgs(4, "a"), msgs(3, "c")
	s.add(append(a, c...)...)
	var log callLog
	var once sync.Once
	p.set(func(_ context.Context, ms []outbox.Message) []error {
		log.record(ms)
		errs := make([]error, len(ms))
		for i, m := range ms {
			if m.ID == a[1].ID {
				once.Do(func() { errs[i] = errors.New("transient") })
			}
		}
		return errs
	})
	var results []BatchResult
	var mu sync.Mutex
	r.cfg.Hooks.AfterComplete = func(br BatchResult) {
		mu.Lock()
		results = append(results, br)
		mu.Unlock()
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 7 })

	calls := log.get()
	want := []uuid.UUID{a[0].ID, a[1].ID, a[1].ID, a[2].ID, a[3].ID}
	if got := sentOrder(calls, "a"); !slices.Equal(got, want) {
		t.Fatalf("key a sent %v, want %v (its failed event again, then the rest)", got, want)
	}
	if got := sentOrder(calls, "c"); !slices.Equal(got, idsOf(c)) {
		t.Fatalf("key c sent %v, want %v", got, idsOf(c))
	}
	mu.Lock()
	first := results[0]
	mu.Unlock()
	if first.Published != 4 || first.Retried != 1 || first.Deferred != 2 {
		t.Fatalf("first batch %+v, want 4 published (a#0, c#0-2), 1 retried (a#1), 2 deferred (a#2, a#3)", first)
	}
	if n := chargedAttempts(s); n != 1 {
		t.Fatalf("%d attempts charged, want 1 (the failed event only)", n)
	}
}

// An outage in a round sends nothing more in the batch and charges nobody.
func TestOutageStopsTheRounds(t *testing.T) {
	r, s, p := newMem(t, Config{Workers: 1})
	s.add(msgs(3, "a")...)
	down := true
	var mu sync.Mutex
	p.set(func(_ context.Context, ms []outbox.Message) []error {
		mu.Lock()
		defer mu.Unlock()
		errs := make([]error, len(ms))
		if down && p.calls.Load() == 2 {
			errs[0] = publishers.Unavailable(errors.New("gone"))
			down = false
		}
		return errs
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 3 })
	if st := r.Stats(); st.Outages != 1 {
		t.Fatalf("%d outages, want 1", st.Outages)
	}
	if n := chargedAttempts(s); n != 0 {
		t.Fatalf("%d attempts charged for an outage", n)
	}
}

// keeper is a memPub that keeps key order by itself.
type keeper struct{ *memPub }

func (keeper) KeepsKeyOrder() bool { return true }

// A publisher that keeps key order gets a key's events in one call.
func TestOrderKeeperGetsTheKeyPipelined(t *testing.T) {
	s, p := &memStore{}, &memPub{}
	r, err := New(s, keeper{p}, &Config{Workers: 1, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var log callLog
	p.set(func(_ context.Context, ms []outbox.Message) []error {
		log.record(ms)
		return make([]error, len(ms))
	})
	a := msgs(20, "a")
	s.add(a...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 20 })
	calls := log.get()
	if len(calls) != 1 || !slices.Equal(idsOf(calls[0]), idsOf(a)) {
		t.Fatalf("calls %v, want one call with the key's 20 events in order", calls)
	}
}

// A publisher that keeps key order fails a key's events after one that
// failed as not sent (publishers.NotSent): the relay leaves them pending
// and uncharged behind it, so that under DeadLetterKey they never die
// unsent with it, and the key resumes in order once the failed one is
// dead.
func TestNotSentEventsAreNotCharged(t *testing.T) {
	s, p := &memStore{}, &memPub{}
	r, err := New(s, keeper{p}, &Config{Workers: 1, PollInterval: 20 * time.Millisecond, KeyedFailure: DeadLetterKey,
		MaxAttempts: 2, RetryBackoff: outbox.Backoff{Min: time.Millisecond, Max: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	a := msgs(5, "a")
	var log callLog
	p.set(func(_ context.Context, ms []outbox.Message) []error {
		log.record(ms)
		errs := make([]error, len(ms))
		failed := false
		for i, m := range ms {
			switch {
			case failed:
				errs[i] = publishers.NotSent(errors.New("an earlier message of its key failed"))
			case m.ID == a[1].ID:
				errs[i], failed = errors.New("refused"), true
			}
		}
		return errs
	})
	s.add(a...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event but the refused one published", func() bool { return len(published(s)) == 4 })
	for _, rec := range s.snapshot() {
		switch {
		case rec.ID == a[1].ID && (rec.status != 2 || rec.Attempts != 2):
			t.Errorf("the refused event: status %d after %d attempts, want dead (2) after 2", rec.status, rec.Attempts)
		case rec.ID != a[1].ID && rec.Attempts != 0:
			t.Errorf("event %v, never tried, was charged %d attempts", rec.ID, rec.Attempts)
		}
	}
	want := []uuid.UUID{a[0].ID, a[1].ID, a[2].ID, a[3].ID, a[4].ID, a[1].ID, a[2].ID, a[3].ID, a[4].ID, a[2].ID, a[3].ID, a[4].ID}
	if got := sentOrder(log.get(), "a"); !slices.Equal(got, want) {
		t.Fatalf("key a sent %v, want %v", got, want)
	}
}

// lateKeeper keeps key order, but says so only once yes is set: a
// publisher that cannot tell when the relay starts (the NATS publisher
// with its broker down).
type lateKeeper struct {
	*memPub
	yes   atomic.Bool
	asked atomic.Int64
}

func (k *lateKeeper) KeepsKeyOrder() bool {
	k.asked.Add(1)
	return k.yes.Load()
}

// A publisher that did not say it keeps key order when the relay started
// is asked again (at most once per orderkeep.Recheck), and once it says yes its
// key's events go in one call.
func TestOrderKeeperAskedAgain(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s, p := &memStore{}, &memPub{}
	k := &lateKeeper{memPub: p}
	r, err := New(s, k, &Config{Workers: 1, PollInterval: 20 * time.Millisecond, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if r.order.Keeps(clock.Now()) || k.asked.Load() != 1 {
		t.Fatalf("asked %d times before a minute passed, want once (at New)", k.asked.Load())
	}
	k.yes.Store(true)
	clock.Advance(orderkeep.Recheck)
	var log callLog
	p.set(func(_ context.Context, ms []outbox.Message) []error {
		log.record(ms)
		return make([]error, len(ms))
	})
	a := msgs(10, "a")
	s.add(a...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 10 })
	if calls := log.get(); len(calls) != 1 {
		t.Fatalf("%d calls, want the key's 10 events in one", len(calls))
	}
	if !s.lastParams().Pipelined {
		t.Error("the claims did not tell the store that the runs are pipelined")
	}
}

// A broker slower than half the publish timeout per round defers a key's
// later events to the next batch instead of failing them as an outage.
func TestSlowRoundsDeferNotFail(t *testing.T) {
	r, s, p := newMem(t, Config{Workers: 1, PublishTimeout: 400 * time.Millisecond})
	p.set(func(ctx context.Context, ms []outbox.Message) []error {
		t := time.NewTimer(250 * time.Millisecond) // a slow broker: each call takes 250ms
		defer t.Stop()
		select {
		case <-t.C:
			return make([]error, len(ms))
		case <-ctx.Done():
			return every(publishers.Unavailable(ctx.Err()))(ctx, ms)
		}
	})
	a := msgs(4, "a")
	s.add(a...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 4 })
	st := r.Stats()
	if st.Outages != 0 {
		t.Fatalf("%d outages: a slow broker's deferred events were failed", st.Outages)
	}
	if st.Batches < 2 {
		t.Fatalf("%d batches: the rounds did not stop at half the publish timeout", st.Batches)
	}
}

// PerKey 1 is heads only: one event of a key per batch.
func TestPerKeyOneIsHeadsOnly(t *testing.T) {
	r, s, _ := newMem(t, Config{Workers: 1, PerKey: 1})
	s.add(msgs(3, "a")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event published", func() bool { return len(published(s)) == 3 })
	if st := r.Stats(); st.Batches != 3 {
		t.Fatalf("%d batches, want 3", st.Batches)
	}
}
