package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/stores"
)

// TestHandlersPlanAsTheSessionDoes: the planner settings a claim makes for
// its own statements (plannerSettings: generic plans, no sequential scans,
// no sorts) are not forced on the statements of in-process handlers, which
// run in the claim's transaction (RunInTx); the claim's statements get them
// back afterwards, for the completion.
func TestHandlersPlanAsTheSessionDoes(t *testing.T) {
	ctx := context.Background()
	pool, db := migrated(t)
	ob := outbox.New(db, nil)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Key: "k1", Payload: []byte("{}")})
	}); err != nil {
		t.Fatal(err)
	}
	s := db.Store()
	b, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: time.Now().Add(time.Second), PerKey: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort(ctx) //nolint:errcheck // no-op after Complete
	if n := len(b.Records()); n != 1 {
		t.Fatalf("claimed %d events, want 1", n)
	}
	settings := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	},
	) (got [3]string) {
		t.Helper()
		if err := q.QueryRow(ctx, `SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan'),
			current_setting('enable_sort')`).Scan(&got[0], &got[1], &got[2]); err != nil {
			t.Fatal(err)
		}
		return got
	}
	var session [3]string
	{
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		session = settings(conn)
		conn.Release()
	}
	claim := [3]string{"force_generic_plan", "off", "off"}
	if got := settings(b.(*batch).tx); got != claim {
		t.Fatalf("the claim's own settings: %v, want %v", got, claim)
	}
	err = b.(*batch).RunInTx(ctx, func(tx pgx.Tx) error {
		if got := settings(tx); got != session {
			t.Errorf("a handler's statements plan with %v, want the session's %v", got, session)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := settings(b.(*batch).tx); got != claim {
		t.Errorf("after a handler ran, the claim's settings are %v, want %v", got, claim)
	}
	if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: []uuid.UUID{b.Records()[0].ID}, DeletePublished: true}); err != nil {
		t.Fatal(err)
	}
}

// migrated returns the test's pool and a DB on a schema of its own,
// migrated.
func migrated(t testing.TB) (*pgxpool.Pool, *DB) {
	t.Helper()
	pool := pgtest.Pool(t)
	db, err := New(pool, &Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, db
}
