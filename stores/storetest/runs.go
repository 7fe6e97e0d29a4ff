package storetest

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// With PerKey, a claim takes each key's head and the records right after
// it, in the key's order, up to PerKey of a key; a record left unnamed at
// Complete stays pending and is the key's next head.
func testOrderedRuns(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 5, t0)
	c := keyed("orders", "k2", 2, t0.Add(time.Millisecond))
	u := msgs("orders", 1)
	enqueue(t, h, append(append(a, c...), u...))
	now := t0.Add(time.Hour)
	b := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 3})
	if !sameIDs(b.Records(), a[0], a[1], a[2], c[0], c[1], u[0]) {
		t.Fatalf("claim with PerKey 3: got %v, want k1's first 3, k2's 2 and the unkeyed one", ids(b.Records()))
	}
	checkKeyOrder(t, b.Records(), map[string][]outbox.Message{"k1": a, "k2": c})
	if b2 := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 3}); len(b2.Records()) != 0 {
		t.Fatalf("while the runs are held, a second claim took %v", ids(b2.Records()))
	}
	// k1's third record is not named: it stays pending, k1's head.
	complete(t, b, stores.Outcome{Now: now, Published: []uuid.UUID{a[0].ID, a[1].ID, c[0].ID, c[1].ID, u[0].ID}, DeletePublished: true})
	b = claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 3})
	if !sameIDs(b.Records(), a[2], a[3], a[4]) {
		t.Fatalf("after the first run: got %v, want k1's records 3 to 5", ids(b.Records()))
	}
	checkKeyOrder(t, b.Records(), map[string][]outbox.Message{"k1": a[2:]})
}

// checkKeyOrder fails unless each key's records in recs come in the key's
// order.
func checkKeyOrder(t *testing.T, recs []stores.Record, order map[string][]outbox.Message) {
	t.Helper()
	pos := map[uuid.UUID]int{}
	for _, ms := range order {
		for i, m := range ms {
			pos[m.ID] = i
		}
	}
	last := map[string]int{}
	for _, r := range recs {
		if r.Key == "" {
			continue
		}
		if p, ok := last[r.Key]; ok && pos[r.ID] <= p {
			t.Fatalf("key %s's records out of order in the batch: %v", r.Key, ids(recs))
		}
		last[r.Key] = pos[r.ID]
	}
}

// A run stops before a record that is not due: the records after it wait,
// whatever their own due times.
func testOrderedRunStopsAtNotDue(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 4, t0)
	a[2].NotBefore = t0.Add(2 * time.Hour)
	enqueue(t, h, a)
	b := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour), PerKey: 10})
	if !sameIDs(b.Records(), a[0], a[1]) {
		t.Fatalf("got %v, want k1's first 2 (the third is not due)", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: t0, Published: ids(b.Records())})
	if b := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour), PerKey: 10}); len(b.Records()) != 0 {
		t.Fatalf("while k1's head is not due: claimed %v", ids(b.Records()))
	}
}

// A run cut short by the batch's limit leaves the key's next records to
// nobody else while the run is held: a second claim, however deep, takes
// none of them, and takes them once the first batch has ended.
func testOrderedRunNeverPassesAHeldRecord(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 5, t0)
	enqueue(t, h, a)
	now := t0.Add(time.Hour)
	b1 := claimP(t, h.Store, stores.ClaimParams{Limit: 2, Now: now, PerKey: 5})
	if !sameIDs(b1.Records(), a[0], a[1]) {
		t.Fatalf("claim of 2: got %v, want k1's first 2", ids(b1.Records()))
	}
	b2 := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 5})
	if len(b2.Records()) != 0 {
		t.Fatalf("while k1's first 2 are held, a second claim took %v: records past a held one", ids(b2.Records()))
	}
	complete(t, b1, stores.Outcome{Now: now, Published: ids(b1.Records()), DeletePublished: true})
	if err := b2.Abort(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b3 := claimP(t, h.Store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 5})
	if !sameIDs(b3.Records(), a[2], a[3], a[4]) {
		t.Fatalf("after the first batch: got %v, want k1's last 3", ids(b3.Records()))
	}
}

// Several relays drain many keys with runs, completing only part of each
// batch (the rest left pending, as the relay does after a failure): each
// key's records are claimed in order, never by two batches at once. Half
// of them are in another process when the harness can open a second
// store (Harness.Open): they read each other's keys from cursors of their
// own. (PostgreSQL's claim locks a run's rows as its index range finds
// them; a draft that skipped the rows another transaction held, rather
// than fail on them, took rows out of turn here.)
func testOrderedRunsConcurrentRelays(t *testing.T, h Harness) {
	const keys, per, relays = 30, 12, 4
	all, pos := keyedBacklog(keys, per)
	enqueue(t, h, all)
	ctx := ctxT(t)
	processes := []stores.Store{h.Store}
	if h.Open != nil {
		processes = append(processes, h.Open(t))
	}
	var mu sync.Mutex
	inFlight := map[string]bool{}
	next := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, relays*keys*per)
	for w := range relays {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			idle := 0
			for idle < 3 {
				b, err := processes[w%len(processes)].Claim(ctx, stores.ClaimParams{Limit: 9, Now: t0.Add(time.Hour), PerKey: 4})
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
				// Publish each key's run up to a random point, as a relay
				// whose event failed would: the rest stays pending.
				var done []uuid.UUID
				mu.Lock()
				expect := map[string]int{}   // the key's next position in this batch
				stopped := map[string]bool{} // the key's run was cut here
				for _, r := range recs {
					e, seen := expect[r.Key]
					if !seen {
						if inFlight[r.Key] {
							errs <- fmt.Errorf("key %s claimed by two batches at once", r.Key)
						}
						inFlight[r.Key] = true
						e = next[r.Key]
					}
					if pos[r.ID] != e {
						errs <- fmt.Errorf("key %s: claimed record %d, want %d", r.Key, pos[r.ID], e)
					}
					expect[r.Key] = pos[r.ID] + 1
					if stopped[r.Key] || rnd.IntN(4) == 0 {
						stopped[r.Key] = true
						continue
					}
					next[r.Key]++
					done = append(done, r.ID)
				}
				// Release the keys before completing: their next record
				// becomes claimable only once Complete has committed.
				for k := range expect {
					delete(inFlight, k)
				}
				mu.Unlock()
				if err := b.Complete(ctx, stores.Outcome{Now: t0, Published: done, DeletePublished: true}); err != nil {
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
			t.Fatalf("key-%02d: %d of %d records published", k, n, per)
		}
	}
}

// An ordered claim with runs fills its batch from what is due: unkeyed
// records alone, or a key's run and unkeyed records together, each kind in
// its order. (PostgreSQL claims part of the unkeyed records in the round
// trip of its key walk and the rest of their share after it: a draft took
// the first part's records twice, since SKIP LOCKED does not skip the rows
// a transaction holds itself.)
func testOrderedRunsFillTheBatch(t *testing.T, h Harness) {
	u := msgs("orders", 12)
	enqueue(t, h, u)
	now := t0.Add(time.Hour)
	p := stores.ClaimParams{Limit: 8, Now: now, PerKey: 4}
	b := claimP(t, h.Store, p)
	if !sameIDs(b.Records(), u[:8]...) {
		t.Fatalf("unkeyed records only: got %v, want the first 8", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records()), DeletePublished: true})

	a := keyed("orders", "k1", 6, t0.Add(time.Millisecond))
	enqueue(t, h, a)
	b = claimP(t, h.Store, p)
	var gotKeyed, gotUnkeyed []stores.Record
	for _, r := range b.Records() {
		if r.Key == "" {
			gotUnkeyed = append(gotUnkeyed, r)
		} else {
			gotKeyed = append(gotKeyed, r)
		}
	}
	if len(b.Records()) != 8 || len(gotKeyed) == 0 || len(gotUnkeyed) == 0 {
		t.Fatalf("a key of 6 and 4 unkeyed records: got %v, want 8, some of each", ids(b.Records()))
	}
	if !sameIDs(gotKeyed, a[:len(gotKeyed)]...) || !sameIDs(gotUnkeyed, u[8:8+len(gotUnkeyed)]...) {
		t.Fatalf("got %v, want k1's first records and the oldest unkeyed ones", ids(b.Records()))
	}
	checkKeyOrder(t, b.Records(), map[string][]outbox.Message{"k1": a})
}
