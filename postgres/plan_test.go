package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// TestClaimAfterBacklogGrows is the relay stall seen in the benchmark's
// latency workload: a relay that claims many times while its table is
// nearly empty (LISTEN/NOTIFY wakes it on every commit) used to have
// PostgreSQL cache a generic plan of the ordered claim made for that tiny
// table: a sequential scan of the table on the outside, every key's head
// looked up again for each row. When a backlog then built up, each claim
// cost rows × keys index probes, seconds to minutes, and the relay fell
// further behind. Claims must plan for the table as it is now.
//
// The claim is bounded by a context deadline far above what a sane plan
// needs (tens of milliseconds here) and far below what the bad one needs.
func TestClaimAfterBacklogGrows(t *testing.T) {
	ctx := context.Background()
	shared := pgtest.Pool(t)
	cfg := &postgres.Config{Schema: pgtest.Schema(t, shared)}
	// One connection: every claim runs on the same session, so on the same
	// prepared statements and the plans PostgreSQL caches for them.
	pc, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	s := db.Store()
	table := `"` + cfg.Schema + `".messages`
	insert := func(from, to, keys int) {
		t.Helper()
		_, err := shared.Exec(ctx, `INSERT INTO `+table+` (id, topic, key, type, payload, created_at, available_at)
			SELECT gen_random_uuid(), 'orders', (g % $3)::text, 'T', '\x00', now(), now()
			FROM generate_series($1::int, $2::int) g`, from, to, keys)
		if err != nil {
			t.Fatal(err)
		}
	}

	// An idle relay: claims that find the one pending event and let it go,
	// more than the 5 PostgreSQL plans afresh before it considers caching a
	// generic plan.
	insert(1, 1, 1)
	for range 12 {
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Abort(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A backlog: 20 events for each of 1,000 keys. Another relay (its own
	// store and session) holds every key's head, so this claim must look at
	// each key and find nothing to take, as the second worker of a relay
	// did in the stalled runs.
	insert(2, 20_000, 1000)
	other, err := postgres.New(shared, cfg)
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Store().Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Abort(ctx) }) // before the schema is dropped
	if n := len(held.Records()); n != 1000 {
		t.Fatalf("the other relay claimed %d heads, want 1000", n)
	}

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	b, err := s.Claim(cctx, stores.ClaimParams{Limit: 1000, Now: time.Now()})
	if errors.Is(err, context.DeadlineExceeded) || cctx.Err() != nil {
		t.Fatalf("a claim over 20,000 pending events did not finish within 10s (%v): a plan cached for the empty table?", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.Records()); n != 0 {
		t.Errorf("claimed %d events whose heads another relay holds, want 0", n)
	}
	_ = b.Abort(ctx)
	t.Logf("claim with every head held: %v", time.Since(start).Round(time.Millisecond))

	// Once the other relay lets go, the heads are this one's.
	if err := held.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err = s.Claim(cctx, stores.ClaimParams{Limit: 1000, Now: time.Now()})
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	defer b.Abort(ctx) //nolint:errcheck
	if n := len(b.Records()); n != 1000 {
		t.Errorf("claimed %d heads after release, want 1000", n)
	}
}
