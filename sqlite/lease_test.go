package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)

func testMsgs(n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", CreatedAt: t0}
	}
	return out
}

func mustClaim(t *testing.T, s stores.Store, limit int, now time.Time) stores.Batch {
	t.Helper()
	b, err := s.Claim(context.Background(), stores.ClaimParams{Limit: limit, Now: now})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return b
}

func ids(b stores.Batch) []uuid.UUID {
	out := make([]uuid.UUID, len(b.Records()))
	for i, r := range b.Records() {
		out[i] = r.ID
	}
	return out
}

// A claim is held until its lease lapses, by the claiming clock; after
// that the next claim takes the records, and the first holder's late
// Complete and Abort touch nothing of the new holder's.
func TestLeaseLapses(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(3), true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	lease := b.store.Config().ClaimTimeout
	first := mustClaim(t, b.store, 10, now)
	if len(first.Records()) != 3 {
		t.Fatalf("claimed %d, want 3", len(first.Records()))
	}
	if n := len(mustClaim(t, b.store, 10, now.Add(lease-time.Microsecond)).Records()); n != 0 {
		t.Fatalf("claimed %d records before their lease lapsed", n)
	}
	second := mustClaim(t, b.store, 10, now.Add(lease))
	if len(second.Records()) != 3 {
		t.Fatalf("after the lease lapsed, claimed %d, want 3", len(second.Records()))
	}

	// The zombie completes late: nothing of the second claim changes.
	err := first.Complete(ctx, stores.Outcome{Now: now, Published: ids(first)[:1],
		Dead: []stores.Failure{{ID: ids(first)[1], Err: "zombie"}}})
	if err != nil {
		t.Fatalf("late complete: %v", err)
	}
	st := stats(t, b.store)
	if st.Pending != 3 || st.Published != 0 || st.Dead != 0 {
		t.Fatalf("a lapsed claim's Complete changed records: %+v", st)
	}
	if n := len(mustClaim(t, b.store, 10, now.Add(lease)).Records()); n != 0 {
		t.Fatalf("a lapsed claim's Complete released %d records of the new holder", n)
	}

	// The new holder's outcome applies.
	if err := second.Complete(ctx, stores.Outcome{Now: now, Published: ids(second)}); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, b.store); st.Published != 3 || st.Pending != 0 {
		t.Fatalf("after the holder's Complete: %+v", st)
	}
}

func TestLapsedAbortKeepsNewLease(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(2), true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	cfg := b.store.Config()
	first := mustClaim(t, b.store, 10, now)
	later := now.Add(cfg.ClaimTimeout + time.Second)
	second := mustClaim(t, b.store, 10, later)
	if len(first.Records()) != 2 || len(second.Records()) != 2 {
		t.Fatalf("claims took %d and %d, want 2 and 2", len(first.Records()), len(second.Records()))
	}
	if err := first.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(mustClaim(t, b.store, 10, later).Records()); n != 0 {
		t.Fatalf("a lapsed claim's Abort released %d records of the new holder", n)
	}
	if err := second.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(mustClaim(t, b.store, 10, later).Records()); n != 2 {
		t.Fatalf("after the holder's Abort, claimed %d, want 2", n)
	}
}

func TestClaimTimeoutConfig(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	d, err := sqlite.New(b.db, &sqlite.Config{ClaimTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	if err := b.enqueue(ctx, testMsgs(1), true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	_ = mustClaim(t, s, 1, now) // the holder dies
	if n := len(mustClaim(t, s, 1, now.Add(time.Second-time.Microsecond)).Records()); n != 0 {
		t.Fatal("claimed before the lease lapsed")
	}
	if n := len(mustClaim(t, s, 1, now.Add(time.Second)).Records()); n != 1 {
		t.Fatal("not claimable once the lease lapsed")
	}
}

// Nothing stays open between Claim and Complete: an enqueue goes through
// while a batch is out.
func TestClaimDoesNotBlockEnqueue(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(5), true); err != nil {
		t.Fatal(err)
	}
	batch := mustClaim(t, b.store, 10, t0.Add(time.Hour))
	defer batch.Abort(ctx) //nolint:errcheck
	if len(batch.Records()) != 5 {
		t.Fatalf("claimed %d, want 5", len(batch.Records()))
	}
	// Were the write lock held, this would fail with SQLITE_BUSY after the
	// busy timeout.
	if err := b.enqueue(ctx, testMsgs(1), true); err != nil {
		t.Fatalf("enqueue while a batch is out: %v", err)
	}
}

func stats(t *testing.T, s stores.Store) stores.TopicStats {
	t.Helper()
	st, err := s.Stats(context.Background(), stores.StatsParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 {
		t.Fatalf("stats: %+v, want one topic", st)
	}
	return st[0]
}

func TestListenWakes(t *testing.T) {
	b := setup(t)
	other := open(t, b.path) // a writer on another handle, as another process would be
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.store.Listen(ctx, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	waitWake(t, woke) // the wake at the start
	for range 2 {
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.ob.Enqueue(ctx, tx, outbox.Message{Topic: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		waitWake(t, woke)
	}
}

func waitWake(t *testing.T, woke <-chan struct{}) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(time.Minute): // bounds a failure only: a wake-up takes 10ms
		t.Fatal("no wake-up within a minute")
	}
}

// A Complete that fails applies nothing and leaves the batch open: Abort
// then releases the records at once.
func TestFailedCompleteThenAbort(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(3), true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	batch := mustClaim(t, b.store, 10, now)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if err := batch.Complete(dead, stores.Outcome{Now: now, Published: ids(batch)}); err == nil {
		t.Fatal("Complete with a cancelled context succeeded")
	}
	if err := batch.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	again := mustClaim(t, b.store, 10, now)
	if len(again.Records()) != 3 {
		t.Fatalf("after a failed Complete and Abort, claimed %d, want 3", len(again.Records()))
	}
	if err := again.Complete(ctx, stores.Outcome{Now: now, Published: ids(again)}); err != nil {
		t.Fatal(err)
	}
	if err := again.Complete(ctx, stores.Outcome{Now: now, Published: ids(again)}); err == nil {
		t.Fatal("a second Complete succeeded")
	}
	if err := again.Abort(ctx); err != nil {
		t.Fatalf("Abort after Complete: %v", err)
	}
	if st := stats(t, b.store); st.Published != 3 {
		t.Fatalf("stats: %+v, want 3 published", st)
	}
}
