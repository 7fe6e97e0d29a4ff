package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// TestClaimInEveryQueryExecMode: a claim begins its transaction in the
// pipeline of its first statements and commits in its completion's, so it
// must hold whatever query mode the pool is set to — pgx's statement
// cache (the default), described or plain extended-protocol statements,
// or the simple protocol a connection pooler such as PgBouncer may need:
// events enqueued, claimed in key order, a handler run in the claim's
// transaction, the claimed rows held until the claim ends, the rows
// deleted once complete, an empty claim leaving its connection idle, and
// an aborted claim leaving its rows pending.
func TestClaimInEveryQueryExecMode(t *testing.T) {
	pgtest.Pool(t) // skips, or fails under CI, without PostgreSQL
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			cfg, err := pgxpool.ParseConfig(pgtest.URL())
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.DefaultQueryExecMode = mode
			cfg.MaxConns = 2
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(t, pool)})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			ob := outbox.New(db, nil)
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				return ob.Enqueue(ctx, tx,
					outbox.Message{Topic: "orders", Key: "a", Payload: []byte("a1")},
					outbox.Message{Topic: "orders", Key: "a", Payload: []byte("a2")},
					outbox.Message{Topic: "orders", Payload: []byte("u")})
			}); err != nil {
				t.Fatal(err)
			}
			s := db.Store()
			p := stores.ClaimParams{Limit: 10, Now: time.Now().Add(time.Second), PerKey: 1}
			claim := func() stores.Batch {
				t.Helper()
				b, err := s.Claim(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Abort(ctx) }) // before the pool closes; a no-op once ended
				return b
			}
			payloads := func(b stores.Batch) map[string]bool {
				got := map[string]bool{}
				for _, r := range b.Records() {
					got[string(r.Payload)] = true
				}
				return got
			}

			// Aborted: nothing changes.
			b := claim()
			if got := payloads(b); len(got) != 2 || !got["a1"] || !got["u"] {
				t.Fatalf("claimed %v, want a1 (a's head) and u", got)
			}
			if err := b.Abort(ctx); err != nil {
				t.Fatal(err)
			}

			b = claim()
			if got := payloads(b); len(got) != 2 || !got["a1"] || !got["u"] {
				t.Fatalf("after an abort, claimed %v, want a1 and u again", got)
			}
			// The claim holds its rows until it ends: its transaction is
			// open, and another session skips them.
			var free int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+db.Config().Schema+
				`.messages FOR UPDATE SKIP LOCKED) f`).Scan(&free); err != nil {
				t.Fatal(err)
			}
			if free != 1 {
				t.Fatalf("another session found %d rows free during the claim, want 1 (a2)", free)
			}
			var pending int
			if err := b.(stores.TxRunner[pgx.Tx]).RunInTx(ctx, func(tx pgx.Tx) error {
				return tx.QueryRow(ctx, `SELECT count(*) FROM `+db.Config().Schema+`.messages WHERE status = 0`).Scan(&pending)
			}); err != nil {
				t.Fatal(err)
			}
			if pending != 3 {
				t.Fatalf("a handler in the claim's transaction counted %d pending rows, want 3", pending)
			}
			var ids []uuid.UUID
			for _, r := range b.Records() {
				ids = append(ids, r.ID)
			}
			if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: ids, DeletePublished: true}); err != nil {
				t.Fatal(err)
			}

			b = claim()
			if got := payloads(b); len(got) != 1 || !got["a2"] {
				t.Fatalf("after the completion, claimed %v, want a2", got)
			}
			if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: []uuid.UUID{b.Records()[0].ID}, DeletePublished: true}); err != nil {
				t.Fatal(err)
			}
			if b := claim(); len(b.Records()) != 0 {
				t.Fatalf("claimed %d events from an empty table", len(b.Records()))
			}
			var left int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+db.Config().Schema+`.messages`).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Fatalf("%d rows left, want 0", left)
			}
			for _, c := range pool.AcquireAllIdle(ctx) {
				if st := c.Conn().PgConn().TxStatus(); st != 'I' {
					t.Errorf("a pooled connection is in transaction state %q, want idle", st)
				}
				c.Release()
			}
		})
	}
}
