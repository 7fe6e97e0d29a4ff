package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// TestRunMeetsAHeldRow: a run locked in order that meets a row another
// transaction holds fails with lock_not_available (it must not skip the
// row and take the ones after it), and the claim starts again with ranked
// runs from the key it started from: the cursor the first attempt moved
// is put back.
func TestRunMeetsAHeldRow(t *testing.T) {
	pool, s := keyedEvents(t, 6, "k1", "k2", "k3")
	holdRow(t, pool, s, "k2#4")

	// Two heads a claim, from k2 on; the first run of k2 (#2) and the row
	// after it (#3) come in the walk's statement, the rest of its run in
	// the runs' statement, which meets #4.
	p := stores.ClaimParams{Limit: 8, Now: time.Now().Add(time.Second), PerKey: 4}
	s.cursor.Set("k1")
	if err := claimInOrder(t, pool, s, p); !isLockNotAvailable(err) {
		t.Fatalf("claim with runs locked in order: %v, want lock_not_available", err)
	}
	if got := s.cursor.Get(); got != "k1" {
		t.Fatalf("after the failed attempt the cursor is %q, want k1, where it started", got)
	}

	s.cursor.Set("k1")
	got := claimPayloads(t, s, p)
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
	pool, s := keyedEvents(t, 2, "k1", "k2", "k3", "k4", "k5", "k6")
	holdRow(t, pool, s, "k4#1")

	// Two heads (k1, k2) with their runs, then the range from k2 on.
	p := stores.ClaimParams{Limit: 8, Now: time.Now().Add(time.Second), PerKey: 4}
	if err := claimInOrder(t, pool, s, p); !isLockNotAvailable(err) {
		t.Fatalf("claim with its range locked in order: %v, want lock_not_available", err)
	}

	s.cursor.Set("")
	got := claimPayloads(t, s, p)
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

// TestContinuationMeetsAHeldRow: a continuation whose run meets a row
// another transaction holds (a fresh claim that took the key's next rows,
// in the same process) starts again ranked and passes the key over, but
// does not make the store's claims rank for rankedSpell: in one process
// that race is of the moment, and the spell would rank every claim.
func TestContinuationMeetsAHeldRow(t *testing.T) {
	ctx := context.Background()
	pool, s := keyedEvents(t, 6, "k1")
	p := stores.ClaimParams{Limit: 8, Now: time.Now().Add(time.Second), PerKey: 2}
	claimed, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claimed.Abort(ctx) })
	if n := len(claimed.Records()); n != 2 {
		t.Fatalf("claimed %d records, want k1's first 2", n)
	}
	holdRow(t, pool, s, "k1#3")
	next, err := claimed.(stores.Continuer).Continue(ctx, p)
	if err != nil {
		t.Fatalf("Continue: %v", err)
	}
	if next != nil {
		t.Cleanup(func() { _ = next.Abort(ctx) })
		t.Fatalf("the continuation took %d records past a held row, want none", len(next.Records()))
	}
	if s.runLocking() != lockInOrder {
		t.Fatal("after a continuation met a held row the store's claims rank their runs: want them locked in order still")
	}
}

// keyedEvents returns a store whose table holds n events of each of keys,
// their payloads "k#1" to "k#n" in their key, one transaction a round.
func keyedEvents(t *testing.T, n int, keys ...string) (*pgxpool.Pool, *Store) {
	t.Helper()
	ctx := context.Background()
	pool, db := migrated(t)
	ob := outbox.New(db, nil)
	for i := 1; i <= n; i++ {
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
	return pool, db.Store()
}

// holdRow locks the row of the event whose payload is payload in a
// transaction of its own until the test ends, as another relay would.
func holdRow(t *testing.T, pool *pgxpool.Pool, s *Store, payload string) {
	t.Helper()
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	if _, err := holder.Exec(ctx, `SELECT FROM `+s.nm.table+` WHERE payload = $1 FOR UPDATE`, []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// claimInOrder runs one attempt of s's ordered claim with p, runs and
// ranges locked in order, in a transaction it rolls back, and returns its
// error.
func claimInOrder(t *testing.T, pool *pgxpool.Pool, s *Store, p stores.ClaimParams) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing to keep
	return s.claim(ctx, tx, p, &batch{s: s, tx: tx}, lockInOrder)
}

// claimPayloads claims with p through s.Claim and returns the payloads
// claimed, sorted; the batch is aborted when the test ends.
func claimPayloads(t *testing.T, s *Store, p stores.ClaimParams) []string {
	t.Helper()
	ctx := context.Background()
	claimed, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claimed.Abort(ctx) })
	var got []string
	for _, r := range claimed.Records() {
		got = append(got, string(r.Payload))
	}
	slices.Sort(got)
	return got
}
