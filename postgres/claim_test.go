package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// A claim with runs walks at most a quarter of its limit in keys first; when
// the keys have nothing behind their heads, the room goes to more heads, so
// many keys with one event each still fill the batch, each key once.
func TestClaimFillsWithHeadsWhenRunsAreShort(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, 40)
	for i := range msgs {
		msgs[i] = outbox.Message{Topic: "orders", Key: fmt.Sprintf("k%02d", i), Type: "T"}
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return outbox.New(db, nil).Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	b, err := db.Store().Claim(ctx, stores.ClaimParams{Limit: 20, Now: time.Now().Add(time.Minute), PerKey: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort(ctx) //nolint:errcheck
	keys := map[string]bool{}
	for _, r := range b.Records() {
		if keys[r.Key] {
			t.Fatalf("key %s twice in one batch", r.Key)
		}
		keys[r.Key] = true
	}
	if len(keys) != 20 {
		t.Fatalf("claimed %d keys' heads, want 20 (5 from the walk, 15 more for the room the empty runs left)", len(keys))
	}
}
