package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// msgs returns n valid unkeyed messages on topic, created a microsecond
// apart from t0, with ids set.
func msgs(topic string, n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{
			ID:        outbox.NewID(),
			Topic:     topic,
			Type:      "Tested",
			Payload:   []byte(fmt.Sprintf(`{"n":%d}`, i)),
			CreatedAt: t0.Add(time.Duration(i) * time.Microsecond),
		}
	}
	return out
}

func enqueue(t *testing.T, h Harness, m []outbox.Message) {
	t.Helper()
	if err := h.Enqueue(ctxT(t), m, true); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
}

func claim(t *testing.T, s stores.Store, limit int, now time.Time) stores.Batch {
	t.Helper()
	ctx := ctxT(t)
	b, err := s.Claim(ctx, stores.ClaimParams{Limit: limit, Now: now})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { _ = b.Abort(ctx) })
	return b
}

func complete(t *testing.T, b stores.Batch, o stores.Outcome) {
	t.Helper()
	if err := b.Complete(ctxT(t), o); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

func ids(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func idSet(recs []stores.Record) map[uuid.UUID]bool {
	out := make(map[uuid.UUID]bool, len(recs))
	for _, r := range recs {
		out[r.ID] = true
	}
	return out
}

// stats is Stats by topic, as of a time after every time the suite writes
// but the NotBefore cases'.
func stats(t *testing.T, s stores.Store) map[string]stores.TopicStats {
	t.Helper()
	return statsAt(t, s, t0.Add(1000*time.Hour))
}

func testRoundTrip(t *testing.T, h Harness) {
	want := outbox.Message{
		ID:      outbox.NewID(),
		Topic:   "orders",
		Key:     "order-42",
		Type:    "OrderConfirmed",
		Payload: []byte{0, 1, 2, 0xff, 'x'},
		// What JSON escapes, too: a store that keeps headers as JSON
		// must give the characters back, not their escapes.
		Headers: map[string]string{"correlation-id": "c-1", "traceparent": "00-abc-def-01", "x-unicode": "ç ☃",
			"x-escaped": `say "hi" \ <b>&amp;</b>` + "\u2028\tend"},
		CreatedAt: t0,
	}
	empty := outbox.Message{ID: outbox.NewID(), Topic: "orders", CreatedAt: t0.Add(time.Millisecond)}
	enqueue(t, h, []outbox.Message{want, empty})

	recs := claim(t, h.Store, 10, t0.Add(time.Second)).Records()
	if len(recs) != 2 {
		t.Fatalf("claimed %d records, want 2", len(recs))
	}
	got := recs[0]
	if got.ID != want.ID || got.Topic != want.Topic || got.Key != want.Key || got.Type != want.Type ||
		!bytes.Equal(got.Payload, want.Payload) || !maps.Equal(got.Headers, want.Headers) ||
		!got.CreatedAt.Equal(want.CreatedAt) || got.Attempts != 0 || got.LastError != "" {
		t.Errorf("round trip changed the message:\n got %+v\nwant %+v", got, want)
	}
	e := recs[1]
	if e.ID != empty.ID || e.Key != "" || e.Type != "" || len(e.Payload) != 0 || len(e.Headers) != 0 {
		t.Errorf("empty fields did not round-trip: %+v", e)
	}
}

func testRollback(t *testing.T, h Harness) {
	if err := h.Enqueue(ctxT(t), msgs("orders", 3), false); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if recs := claim(t, h.Store, 10, t0.Add(time.Hour)).Records(); len(recs) != 0 {
		t.Fatalf("a rolled-back transaction left %d claimable records", len(recs))
	}
	if st := stats(t, h.Store); len(st) != 0 {
		t.Fatalf("a rolled-back transaction shows in stats: %+v", st)
	}
}

func testManyInOneCall(t *testing.T, h Harness) {
	const n = 10000 // more than one statement's worth of parameters
	m := msgs("bulk", n)
	enqueue(t, h, m)
	got := map[uuid.UUID]bool{}
	for {
		b := claim(t, h.Store, 3000, t0.Add(time.Hour))
		recs := b.Records()
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			if got[r.ID] {
				t.Fatalf("record %s claimed twice", r.ID)
			}
			got[r.ID] = true
		}
		complete(t, b, stores.Outcome{Now: t0, Published: ids(recs), DeletePublished: true})
	}
	if len(got) != n {
		t.Fatalf("claimed %d distinct records, want %d", len(got), n)
	}
}

func testClaimIsExclusive(t *testing.T, h Harness) {
	enqueue(t, h, msgs("orders", 10))
	now := t0.Add(time.Hour)
	a := claim(t, h.Store, 6, now)
	b := claim(t, h.Store, 6, now)
	if len(a.Records()) != 6 || len(b.Records()) != 4 {
		t.Fatalf("two claims took %d and %d records, want 6 and 4", len(a.Records()), len(b.Records()))
	}
	sa := idSet(a.Records())
	for _, r := range b.Records() {
		if sa[r.ID] {
			t.Fatalf("record %s claimed by two relays at once", r.ID)
		}
	}
	if c := claim(t, h.Store, 10, now); len(c.Records()) != 0 {
		t.Fatalf("a third claim took %d held records", len(c.Records()))
	}
}

func testAbortReleases(t *testing.T, h Harness) {
	enqueue(t, h, msgs("orders", 5))
	now := t0.Add(time.Hour)
	a := claim(t, h.Store, 10, now)
	if err := a.Abort(ctxT(t)); err != nil {
		t.Fatalf("abort: %v", err)
	}
	b := claim(t, h.Store, 10, now)
	if len(b.Records()) != 5 {
		t.Fatalf("after abort, claimed %d, want all 5", len(b.Records()))
	}
	for _, r := range b.Records() {
		if r.Attempts != 0 {
			t.Fatalf("abort charged an attempt: %+v", r)
		}
	}
}

func testMarkPublishedAndPurge(t *testing.T, h Harness) {
	enqueue(t, h, msgs("orders", 5))
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records())})
	if c := claim(t, h.Store, 10, now.Add(time.Hour)); len(c.Records()) != 0 {
		t.Fatalf("published records claimed again: %d", len(c.Records()))
	}
	if st := stats(t, h.Store)["orders"]; st.Published != 5 || st.Pending != 0 {
		t.Fatalf("stats after mark: %+v, want 5 published, 0 pending", st)
	}
	n, err := h.Store.Purge(ctxT(t), stores.PurgeParams{Before: now, Limit: 10})
	if err != nil || n != 0 {
		t.Fatalf("purge before the publish time deleted %d (err %v), want 0", n, err)
	}
	n, err = h.Store.Purge(ctxT(t), stores.PurgeParams{Before: now.Add(time.Second), Limit: 3})
	if err != nil || n != 3 {
		t.Fatalf("purge with limit 3 deleted %d (err %v)", n, err)
	}
	n, err = h.Store.Purge(ctxT(t), stores.PurgeParams{Before: now.Add(time.Second)})
	if err != nil || n != 2 {
		t.Fatalf("second purge deleted %d (err %v), want the other 2", n, err)
	}
	if st := stats(t, h.Store); len(st) != 0 {
		t.Fatalf("rows left after purge: %+v", st)
	}
}

func testDeletePublished(t *testing.T, h Harness) {
	enqueue(t, h, msgs("orders", 5))
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records()), DeletePublished: true})
	if st := stats(t, h.Store); len(st) != 0 {
		t.Fatalf("deleted records still counted: %+v", st)
	}
}

func testRetryBackoff(t *testing.T, h Harness) {
	enqueue(t, h, msgs("orders", 1))
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	id := b.Records()[0].ID
	next := now.Add(30 * time.Second)
	complete(t, b, stores.Outcome{Now: now, Retry: []stores.Failure{{ID: id, Err: "broker said no", NextAttempt: next}}})

	if c := claim(t, h.Store, 10, next.Add(-time.Millisecond)); len(c.Records()) != 0 {
		t.Fatalf("a retry was claimed before its next attempt")
	}
	c := claim(t, h.Store, 10, next)
	if len(c.Records()) != 1 {
		t.Fatalf("the retry was not claimable at its next attempt")
	}
	r := c.Records()[0]
	if r.ID != id || r.Attempts != 1 || r.LastError != "broker said no" {
		t.Fatalf("retried record: %+v, want attempts 1 and the stored error", r)
	}
	if st := stats(t, h.Store)["orders"]; st.Pending != 1 {
		t.Fatalf("a record waiting for retry is pending: %+v", st)
	}
}

func testDeadAndReplay(t *testing.T, h Harness) {
	m := msgs("orders", 3)
	enqueue(t, h, m)
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now,
		Published: []uuid.UUID{m[0].ID},
		Dead:      []stores.Failure{{ID: m[1].ID, Err: "too large"}, {ID: m[2].ID, Err: "rejected"}},
	})
	if c := claim(t, h.Store, 10, now.Add(1000*time.Hour)); len(c.Records()) != 0 {
		t.Fatalf("dead records were claimed")
	}
	st := stats(t, h.Store)["orders"]
	if st.Dead != 2 || st.Pending != 0 {
		t.Fatalf("stats: %+v, want 2 dead", st)
	}
	dead, err := h.Store.Dead(ctxT(t), stores.DeadParams{Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].ID != m[1].ID || dead[0].LastError != "too large" || dead[0].Attempts != 1 {
		t.Fatalf("dead list: %+v", dead)
	}
	n, err := h.Store.Replay(ctxT(t), stores.ReplayParams{IDs: []uuid.UUID{m[2].ID}, Now: now})
	if err != nil || n != 1 {
		t.Fatalf("replay one: n=%d err=%v", n, err)
	}
	c := claim(t, h.Store, 10, now)
	if len(c.Records()) != 1 || c.Records()[0].ID != m[2].ID || c.Records()[0].Attempts != 0 {
		t.Fatalf("replayed record: %+v", c.Records())
	}
	_ = c.Abort(ctxT(t))
	n, err = h.Store.Replay(ctxT(t), stores.ReplayParams{Now: now})
	if err != nil || n != 1 {
		t.Fatalf("replay all: n=%d err=%v, want the one left", n, err)
	}
}

func testNotBefore(t *testing.T, h Harness) {
	m := msgs("orders", 2)
	m[1].NotBefore = t0.Add(10 * time.Minute)
	enqueue(t, h, m)
	b := claim(t, h.Store, 10, t0.Add(10*time.Minute-time.Millisecond))
	if len(b.Records()) != 1 || b.Records()[0].ID != m[0].ID {
		t.Fatalf("before its time, claimed %v; want only the undelayed one", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: t0, Published: ids(b.Records())})
	c := claim(t, h.Store, 10, t0.Add(10*time.Minute))
	if len(c.Records()) != 1 || c.Records()[0].ID != m[1].ID {
		t.Fatalf("at its time, claimed %v; want the delayed one", ids(c.Records()))
	}
	if !c.Records()[0].NotBefore.Equal(m[1].NotBefore) {
		t.Errorf("NotBefore = %v, want %v", c.Records()[0].NotBefore, m[1].NotBefore)
	}
}

func testUnnamedRecordsUntouched(t *testing.T, h Harness) {
	m := msgs("orders", 4)
	enqueue(t, h, m)
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now, Published: []uuid.UUID{m[0].ID}})
	c := claim(t, h.Store, 10, now)
	got := c.Records()
	if len(got) != 3 {
		t.Fatalf("records the outcome did not name: %d claimable, want 3", len(got))
	}
	for _, r := range got {
		if r.Attempts != 0 || r.LastError != "" {
			t.Fatalf("an unnamed record was charged: %+v", r)
		}
	}
}

func testLimitAndOrder(t *testing.T, h Harness) {
	m := msgs("orders", 20)
	// Enqueue in two transactions, newest first, so insertion order and
	// creation order differ: the claim follows due time.
	enqueue(t, h, m[10:])
	enqueue(t, h, m[:10])
	b := claim(t, h.Store, 7, t0.Add(time.Hour))
	got := ids(b.Records())
	want := ids(recordsOf(m[:7]))
	if !slices.Equal(got, want) {
		t.Fatalf("claim order:\n got %v\nwant %v", got, want)
	}
}

func recordsOf(m []outbox.Message) []stores.Record {
	out := make([]stores.Record, len(m))
	for i := range m {
		out[i].Message = m[i]
	}
	return out
}

func testStats(t *testing.T, h Harness) {
	a := msgs("a", 3)
	b := msgs("b", 2)
	b[0].CreatedAt = t0.Add(-time.Hour)
	enqueue(t, h, append(a, b...))
	st := stats(t, h.Store)
	if st["a"].Pending != 3 || st["b"].Pending != 2 {
		t.Fatalf("pending per topic: %+v", st)
	}
	if !st["a"].OldestPending.Equal(t0) || !st["b"].OldestPending.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("oldest pending per topic: a=%v b=%v", st["a"].OldestPending, st["b"].OldestPending)
	}
}

// testConcurrentRelays drains with several claimers at once and checks that
// every record is completed exactly once.
func testConcurrentRelays(t *testing.T, h Harness) {
	const n, relays = 3000, 4
	enqueue(t, h, msgs("orders", n))
	ctx := ctxT(t)
	var mu sync.Mutex
	seen := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	errs := make(chan error, relays)
	for range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				b, err := h.Store.Claim(ctx, stores.ClaimParams{Limit: 100, Now: t0.Add(time.Hour)})
				if err != nil {
					errs <- err
					return
				}
				recs := b.Records()
				if len(recs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range recs {
					seen[r.ID]++
				}
				mu.Unlock()
				if err := b.Complete(ctx, stores.Outcome{Now: t0, Published: ids(recs)}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Fatalf("claimed %d distinct records, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("record %s claimed %d times", id, c)
		}
	}
}
