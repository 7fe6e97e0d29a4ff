package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// keyed returns n messages of key, created a microsecond apart from start.
func keyed(topic, key string, n int, start time.Time) []outbox.Message {
	out := msgs(topic, n)
	for i := range out {
		out[i].Key = key
		out[i].CreatedAt = start.Add(time.Duration(i) * time.Microsecond)
	}
	return out
}

func claimP(t *testing.T, s stores.Store, p stores.ClaimParams) stores.Batch {
	t.Helper()
	ctx := ctxT(t)
	b, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { _ = b.Abort(ctx) })
	return b
}

func sameIDs(got []stores.Record, want ...outbox.Message) bool {
	g := idSet(got)
	if len(g) != len(want) || len(got) != len(want) {
		return false
	}
	for _, m := range want {
		if !g[m.ID] {
			return false
		}
	}
	return true
}

func names(recs []stores.Record, all map[uuid.UUID]string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = all[r.ID]
	}
	return out
}

// keyedBacklog returns per records of each of keys keys ("key-00" …), and
// each record's place in its key. One key's records are adjacent in time,
// so a store that claims by due time alone would put several of them in
// one batch.
func keyedBacklog(keys, per int) ([]outbox.Message, map[uuid.UUID]int) {
	pos := map[uuid.UUID]int{}
	var all []outbox.Message
	for k := range keys {
		start := t0.Add(time.Duration(k*per) * time.Microsecond)
		for i, m := range keyed("orders", fmt.Sprintf("key-%02d", k), per, start) {
			pos[m.ID] = i
			all = append(all, m)
		}
	}
	return all, pos
}

// Only each key's oldest pending record (its head) is claimable, and only by
// one batch at a time; unkeyed records are not held back.
func testOrderedHeadOnly(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 3, t0)
	d := keyed("orders", "k2", 1, t0)
	u := msgs("orders", 1)
	enqueue(t, h, append(append(a, d...), u...))
	now := t0.Add(time.Hour)

	b1 := claim(t, h.Store, 10, now)
	if !sameIDs(b1.Records(), a[0], d[0], u[0]) {
		t.Fatalf("first claim: got %v, want the heads of k1 and k2 and the unkeyed one", ids(b1.Records()))
	}
	if b2 := claim(t, h.Store, 10, now); len(b2.Records()) != 0 {
		t.Fatalf("while the heads are held, a second claim took %v: a key had two records in flight", ids(b2.Records()))
	}
	complete(t, b1, stores.Outcome{Now: now, Published: ids(b1.Records()), DeletePublished: true})
	for i := 1; i < 3; i++ {
		b := claim(t, h.Store, 10, now)
		if !sameIDs(b.Records(), a[i]) {
			t.Fatalf("claim %d: got %v, want k1's record %d alone", i+1, ids(b.Records()), i)
		}
		complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records())})
	}
}

// A head waiting for its retry holds its key back; other keys flow; a dead
// head lets the key go on.
func testOrderedRetryBlocksKey(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 2, t0)
	c := keyed("orders", "k2", 2, t0)
	enqueue(t, h, append(a, c...))
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	if !sameIDs(b.Records(), a[0], c[0]) {
		t.Fatalf("claim: got %v, want both heads", ids(b.Records()))
	}
	next := now.Add(time.Minute)
	complete(t, b, stores.Outcome{Now: now, Published: []uuid.UUID{c[0].ID},
		Retry: []stores.Failure{{ID: a[0].ID, Err: "nope", NextAttempt: next}}})

	b = claim(t, h.Store, 10, now)
	if !sameIDs(b.Records(), c[1]) {
		t.Fatalf("while k1's head waits for its retry: got %v, want only k2's next", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records())})
	b = claim(t, h.Store, 10, next)
	if !sameIDs(b.Records(), a[0]) {
		t.Fatalf("at the retry time: got %v, want k1's head again", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: next, Dead: []stores.Failure{{ID: a[0].ID, Err: "given up"}}})
	b = claim(t, h.Store, 10, next)
	if !sameIDs(b.Records(), a[1]) {
		t.Fatalf("after k1's head died: got %v, want k1's next", ids(b.Records()))
	}
}

// A delayed head delays its key: order per key wins over the later events'
// own due times.
func testOrderedNotBeforeBlocksKey(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 2, t0)
	a[0].NotBefore = t0.Add(time.Hour)
	enqueue(t, h, a)
	if b := claim(t, h.Store, 10, t0.Add(time.Minute)); len(b.Records()) != 0 {
		t.Fatalf("before the head's time: claimed %v", ids(b.Records()))
	}
	if b := claim(t, h.Store, 10, t0.Add(time.Hour)); !sameIDs(b.Records(), a[0]) {
		t.Fatalf("at the head's time: claimed %v, want the head", ids(b.Records()))
	}
}

// Small batches visit every key: a key is not starved by keys with deeper
// backlogs that sort before it.
func testOrderedFairAcrossKeys(t *testing.T, h Harness) {
	var all []outbox.Message
	name := map[uuid.UUID]string{}
	for i := range 5 { // interleaved: k0#0 k1#0 k2#0 k0#1 …
		for k := range 3 {
			m := keyed("orders", fmt.Sprintf("k%d", k), 1, t0.Add(time.Duration(i*3+k)*time.Millisecond))[0]
			name[m.ID] = fmt.Sprintf("k%d#%d", k, i)
			all = append(all, m)
		}
	}
	enqueue(t, h, all)
	now := t0.Add(time.Hour)
	seen := map[string]bool{}
	var order []string
	for range 2 {
		b := claim(t, h.Store, 2, now)
		order = append(order, names(b.Records(), name)...)
		for _, r := range b.Records() {
			seen[r.Key] = true
		}
		complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records())})
	}
	if len(seen) != 3 {
		t.Fatalf("two claims of 2 served keys %v (%v): a key was starved", seen, order)
	}
}

// Several relays drain many keys at once: each key's records are claimed
// one at a time, in order, never two of one key in flight.
func testOrderedConcurrentRelays(t *testing.T, h Harness) {
	const keys, per, relays = 40, 15, 4
	all, pos := keyedBacklog(keys, per)
	enqueue(t, h, all)
	ctx := ctxT(t)
	var mu sync.Mutex
	inFlight := map[string]bool{}
	next := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, relays)
	for range relays {
		wg.Go(func() {
			idle := 0
			for idle < 3 {
				b, err := h.Store.Claim(ctx, stores.ClaimParams{Limit: 7, Now: t0.Add(time.Hour)})
				if err != nil {
					errs <- err
					return
				}
				recs := b.Records()
				if len(recs) == 0 {
					idle++
					continue
				}
				idle = 0
				mu.Lock()
				for _, r := range recs {
					switch {
					case inFlight[r.Key]:
						errs <- fmt.Errorf("key %s claimed by two batches at once", r.Key)
					case pos[r.ID] != next[r.Key]:
						errs <- fmt.Errorf("key %s: claimed record %d, want %d", r.Key, pos[r.ID], next[r.Key])
					}
					inFlight[r.Key] = true
					next[r.Key]++
				}
				// Release the keys before completing: their next record
				// becomes claimable only once Complete has committed.
				for _, r := range recs {
					delete(inFlight, r.Key)
				}
				mu.Unlock()
				if err := b.Complete(ctx, stores.Outcome{Now: t0, Published: ids(recs), DeletePublished: true}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		if n := next[fmt.Sprintf("key-%02d", k)]; n != per {
			t.Fatalf("key-%02d: %d of %d records claimed", k, n, per)
		}
	}
}

// Two transactions enqueue for one key at once; the one that commits first
// must be claimed first, whatever order they inserted in.
func testOrderedCommitOrderRace(t *testing.T, h Harness) {
	if h.Begin == nil {
		t.Skip("the store's harness gives no Begin")
	}
	ctx := ctxT(t)
	first := keyed("orders", "k", 1, t0)[0]
	second := keyed("orders", "k", 1, t0.Add(time.Millisecond))[0]
	tx1, err := h.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx1.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		tx2, err := h.Begin(ctx)
		if err == nil {
			err = tx2.Enqueue(ctx, second)
			if err == nil {
				err = tx2.Commit(ctx)
			}
		}
		done <- err
	}()
	// A window for the second transaction to commit first, which it can
	// only do if the store lets it overtake the first.
	overtook := false
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		overtook = true
	case <-time.After(200 * time.Millisecond):
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if !overtook {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	firstCommitted := first.ID
	if overtook {
		firstCommitted = second.ID
	}
	b := claim(t, h.Store, 10, t0.Add(time.Hour))
	if len(b.Records()) != 1 || b.Records()[0].ID != firstCommitted {
		t.Fatalf("claimed %v first, want %v (the first to commit)", ids(b.Records()), firstCommitted)
	}
}

// With ordering off, every due record is claimable at once.
func testUnordered(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 3, t0)
	enqueue(t, h, a)
	b := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour), Unordered: true})
	if !sameIDs(b.Records(), a...) {
		t.Fatalf("unordered claim took %v, want all 3", ids(b.Records()))
	}
}

// A head that keeps failing is dead-lettered by hand; its key goes on.
func testDeadLetterByHand(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 2, t0)
	enqueue(t, h, a)
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now, Retry: []stores.Failure{{ID: a[0].ID, Err: "nope", NextAttempt: now.Add(time.Hour)}}})
	n, err := h.Store.DeadLetter(ctxT(t), stores.DeadLetterParams{IDs: []uuid.UUID{a[0].ID, outbox.NewID()}, Reason: "by hand"})
	if err != nil || n != 1 {
		t.Fatalf("dead-letter: n=%d err=%v, want 1", n, err)
	}
	b = claim(t, h.Store, 10, now)
	if !sameIDs(b.Records(), a[1]) {
		t.Fatalf("after dead-lettering k1's head: claimed %v, want k1's next", ids(b.Records()))
	}
	dead, err := h.Store.Dead(ctxT(t), stores.DeadParams{})
	if err != nil || len(dead) != 1 || dead[0].ID != a[0].ID || dead[0].LastError != "by hand; last error: nope" {
		t.Fatalf("dead list: %+v (err %v)", dead, err)
	}
	complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records())})
	if n, err := h.Store.DeadLetter(ctxT(t), stores.DeadLetterParams{IDs: []uuid.UUID{a[1].ID}}); err != nil || n != 0 {
		t.Fatalf("dead-lettering a published record: n=%d err=%v, want 0", n, err)
	}
}
