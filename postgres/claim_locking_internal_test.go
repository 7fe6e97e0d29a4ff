package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// TestRunMeetsAHeldRow: a run locked in order that meets a row another
// transaction holds fails with lock_not_available (it must not skip the
// row and take the ones after it), and the claim starts again with ranked
// runs from the key it started from: the cursor the first attempt moved
// is put back.
func TestRunMeetsAHeldRow(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	s := db.Store()
	ob := outbox.New(db, nil)
	// k1, k2, k3: six events each, #1 to #6 in their key.
	for i := 1; i <= 6; i++ {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, k := range []string{"k1", "k2", "k3"} {
				m := outbox.Message{Topic: "orders", Key: k, Payload: fmt.Appendf(nil, "%s#%d", k, i)}
				if err := ob.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Another transaction holds k2#4.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // only locks
	if _, err := holder.Exec(ctx, `SELECT FROM `+s.nm.table+` WHERE payload = 'k2#4' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	// Two heads a claim, from k2 on; the first run of k2 (#2) and the row
	// after it (#3) come in the walk's statement, the rest of its run in
	// the runs' statement, which meets #4.
	p := stores.ClaimParams{Limit: 8, Now: time.Now().Add(time.Second), PerKey: 4}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.cursor.Set("k1")
	b := &batch{s: s, tx: tx}
	err = s.claim(ctx, tx, p, b, lockInOrder)
	_ = tx.Rollback(ctx)
	if !isLockNotAvailable(err) {
		t.Fatalf("claim with runs locked in order: %v, want lock_not_available", err)
	}
	if got := s.cursor.Get(); got != "k1" {
		t.Fatalf("after the failed attempt the cursor is %q, want k1, where it started", got)
	}

	s.cursor.Set("k1")
	claimed, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer claimed.Abort(ctx) //nolint:errcheck // read only
	var got []string
	for _, r := range claimed.Records() {
		got = append(got, string(r.Payload))
	}
	slices.Sort(got)
	want := []string{"k2#1", "k2#2", "k2#3", "k3#1", "k3#2", "k3#3", "k3#4"}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %q, want %q: k2 up to the row held, k3 as far as PerKey, from the cursor", got, want)
	}
}

// TestRangeMeetsAHeldHead: a claim whose walk stops at its limit reads on
// along the index; locked in order, that range fails at a head another
// transaction holds (a relay in another process, say), and the claim
// starts again ranked: the held key is passed over, the others taken
// from their heads, and the store's claims rank for rankedSpell.
func TestRangeMeetsAHeldHead(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	s := db.Store()
	ob := outbox.New(db, nil)
	keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
	for i := 1; i <= 2; i++ {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for _, k := range keys {
				m := outbox.Message{Topic: "orders", Key: k, Payload: fmt.Appendf(nil, "%s#%d", k, i)}
				if err := ob.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx) //nolint:errcheck // only locks
	if _, err := holder.Exec(ctx, `SELECT FROM `+s.nm.table+` WHERE payload = 'k4#1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	// Two heads (k1, k2) with their runs, then the range from k2 on.
	p := stores.ClaimParams{Limit: 8, Now: time.Now().Add(time.Second), PerKey: 4}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = s.claim(ctx, tx, p, &batch{s: s, tx: tx}, lockInOrder)
	_ = tx.Rollback(ctx)
	if !isLockNotAvailable(err) {
		t.Fatalf("claim with its range locked in order: %v, want lock_not_available", err)
	}

	s.cursor.Set("")
	claimed, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer claimed.Abort(ctx) //nolint:errcheck // read only
	var got []string
	for _, r := range claimed.Records() {
		got = append(got, string(r.Payload))
	}
	slices.Sort(got)
	want := []string{"k1#1", "k1#2", "k2#1", "k2#2", "k3#1", "k3#2", "k5#1", "k5#2"}
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %q, want %q: every key but k4, whose head is held", got, want)
	}
	if s.runLocking() != lockRanked {
		t.Fatal("after a claim met a held row, the store's claims lock runs in order: want them ranked for a while")
	}
	s.rankedUntil.Store(time.Now().Add(-time.Nanosecond).UnixNano())
	if s.runLocking() != lockInOrder {
		t.Fatal("once the spell is over, the store's claims rank their runs: want them locked in order")
	}
}

// TestStoresOfTwoRelays: two relays in two processes — two stores on one
// table, each with its own key cursor, two workers each — drain many
// shallow keys and a few deep ones with small batches, completing only
// part of some (as after a failure). Their walks, runs and ranges meet
// each other's rows all the time: each key's events are still claimed in
// order, never by two batches at once, and all of them.
func TestStoresOfTwoRelays(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	other, err := New(pool, &db.Store().cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(db, nil)
	const shallow, deep = 300, 5
	want := map[string]int{}
	for round := range 20 {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for k := range shallow + deep {
				if k < shallow && round >= 2 {
					continue
				}
				key := fmt.Sprintf("key-%03d", k)
				want[key]++
				m := outbox.Message{Topic: "orders", Key: key, Payload: fmt.Appendf(nil, "%d", round)}
				if err := ob.Enqueue(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	inFlight := map[string]bool{}
	next := map[string]int{}
	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for w := range 4 {
		s := db.Store()
		if w%2 == 1 {
			s = other.Store()
		}
		wg.Go(func() {
			for idle := 0; idle < 3; {
				b, err := s.Claim(ctx, stores.ClaimParams{Limit: 16, Now: time.Now().Add(time.Hour), PerKey: 4, Pipelined: w < 2})
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
				var done []uuid.UUID
				mu.Lock()
				expect := map[string]int{} // the key's next event in this batch
				cut := map[string]bool{}
				for i, r := range recs {
					e, seen := expect[r.Key]
					if !seen {
						if inFlight[r.Key] {
							errs <- fmt.Errorf("key %s claimed by two batches at once", r.Key)
						}
						inFlight[r.Key] = true
						e = next[r.Key]
					}
					n, _ := strconv.Atoi(string(r.Payload))
					if n != e {
						errs <- fmt.Errorf("key %s: claimed event %d, want %d", r.Key, n, e)
					}
					expect[r.Key] = n + 1
					if cut[r.Key] || i%7 == 6 { // left pending, and the key's rest of the batch with it
						cut[r.Key] = true
						continue
					}
					next[r.Key]++
					done = append(done, r.ID)
				}
				for k := range expect {
					delete(inFlight, k)
				}
				mu.Unlock()
				if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: done, DeletePublished: true}); err != nil {
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
	for k, n := range want {
		if next[k] != n {
			t.Errorf("%s: %d of %d events published", k, next[k], n)
		}
	}
}
