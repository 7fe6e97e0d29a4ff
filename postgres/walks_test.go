package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// TestShallowKeysFillTheBatch: a claim whose key walk stops at its limit
// with room left behind short runs (many keys of two events each) reads on
// for more keys until its batch is full, takes no event twice and each
// key's events in order; and claims go on doing so until every event was
// taken once.
func TestShallowKeysFillTheBatch(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const keys, per = 60, 2
	var msgs []outbox.Message
	for i := range per {
		for k := range keys {
			msgs = append(msgs, outbox.Message{Topic: "orders", Key: fmt.Sprintf("k%02d", k), Payload: []byte(fmt.Sprint(i))})
		}
	}
	ob := outbox.New(db, nil)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	s := db.Store()
	seen := map[string]int{} // events of each key taken so far
	for claims := 0; len(seen) < keys || total(seen) < keys*per; claims++ {
		if claims == 10 {
			t.Fatalf("10 claims took %d of %d events", total(seen), keys*per)
		}
		// A limit of 20 with runs allows 5 heads at first: 10 events.
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 20, Now: time.Now().Add(time.Second), PerKey: 4})
		if err != nil {
			t.Fatal(err)
		}
		recs := b.Records()
		if want := min(20, keys*per-total(seen)); len(recs) != want {
			t.Errorf("claim %d took %d events, want %d: the walk stopped with room left", claims, len(recs), want)
		}
		for _, r := range recs {
			if want := fmt.Sprint(seen[r.Key]); string(r.Payload) != want {
				t.Fatalf("claim %d took key %s's event %s, want its event %s", claims, r.Key, r.Payload, want)
			}
			seen[r.Key]++
		}
		if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: recordIDs(recs), DeletePublished: true}); err != nil {
			t.Fatal(err)
		}
	}
}

func total(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

func recordIDs(recs []stores.Record) []uuid.UUID {
	ids := make([]uuid.UUID, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	return ids
}
