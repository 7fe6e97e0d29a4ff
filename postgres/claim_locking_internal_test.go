package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

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
