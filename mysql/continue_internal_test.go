package mysql

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// A continuation whose connection the server ended (its claim timeout
// passed while it waited, or someone killed it) fails Resume, so the
// relay never publishes what it may no longer hold; its rows are free
// again, and a fresh claim takes them in order once the batch before
// completed.
func TestResumeFailsOnceTheSessionEnded(t *testing.T) {
	t.Parallel()
	db, s := migrated(t, nil)
	ctx := context.Background()
	evs := make([]outbox.Message, 8)
	for i := range evs {
		evs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", CreatedAt: time.Now()}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.d.InsertTx(ctx, tx, evs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// migrated enqueued 3 unkeyed events: a claim of 4 + 3 takes them and
	// k1's first 4.
	p := stores.ClaimParams{Limit: 7, Now: time.Now().Add(time.Hour), PerKey: 4}
	b1, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Abort(ctx) //nolint:errcheck // no-op after Complete
	if n := len(b1.Records()); n != 7 {
		t.Fatalf("claim took %d, want k1's first 4 and the 3 unkeyed", n)
	}
	c, err := b1.(stores.Continuer).Continue(ctx, p)
	if err != nil || c == nil {
		t.Fatalf("continue: %v, %v", c, err)
	}
	b2 := c.(*batch)
	defer b2.Abort(ctx) //nolint:errcheck // the connection is gone
	var id int64
	if err := b2.tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := b2.Resume(ctx); err != nil {
		t.Fatalf("resume of a live continuation: %v", err)
	}
	if _, err := db.ExecContext(ctx, `KILL CONNECTION ?`, id); err != nil {
		t.Fatal(err)
	}
	// The server ends the connection, and rolls its transaction back, a
	// moment after KILL returns: wait until it is gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection %d still there 30s after KILL", id)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	if err := b2.Resume(ctx); err == nil {
		t.Fatal("resume after the connection ended: no error")
	}
	if err := b1.Complete(ctx, stores.Outcome{Now: time.Now(), Published: ids(b1.Records()), DeletePublished: true}); err != nil {
		t.Fatal(err)
	}
	b3, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Abort(ctx) //nolint:errcheck // the test's end
	recs := b3.Records()
	if len(recs) != 4 {
		t.Fatalf("fresh claim took %d, want k1's events 5 to 8", len(recs))
	}
	for i, r := range recs {
		if r.ID != evs[4+i].ID {
			t.Fatalf("fresh claim's record %d is %s, want event %d (%s)", i, r.ID, 4+i, evs[4+i].ID)
		}
	}
}

// A continuation is never claimed on a connection the pool does not have
// free: with every connection taken, Continue returns no batch at once
// rather than wait for one.
func TestContinueNeedsAFreeConnection(t *testing.T) {
	t.Parallel()
	db, s := migrated(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs := make([]outbox.Message, 8)
	for i := range evs {
		evs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", CreatedAt: time.Now()}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.d.InsertTx(ctx, tx, evs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	p := stores.ClaimParams{Limit: 7, Now: time.Now().Add(time.Hour), PerKey: 4}
	b1, err := s.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Abort(ctx) //nolint:errcheck // the test's end
	c, err := b1.(stores.Continuer).Continue(ctx, p)
	if err != nil || c != nil {
		t.Fatalf("continue with the pool's only connection taken: %v, %v; want neither", c, err)
	}
	db.SetMaxOpenConns(2)
	c, err = b1.(stores.Continuer).Continue(ctx, p)
	if err != nil || c == nil {
		t.Fatalf("continue with a connection free: %v, %v", c, err)
	}
	defer c.Abort(ctx) //nolint:errcheck // the test's end
	want := []uuid.UUID{evs[4].ID, evs[5].ID, evs[6].ID, evs[7].ID}
	if got := ids(c.Records()); !slices.Equal(got, want) {
		t.Fatalf("continuation: %v, want k1's events 5 to 8 %v", got, want)
	}
}
