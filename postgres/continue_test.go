package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// A continuation whose session the database ended (its claim timeout
// passed while it waited, or someone terminated it) fails Resume, so the
// relay never publishes what it may no longer hold; its rows are free
// again, and a fresh claim takes them in order once the batch before
// completed.
func TestResumeFailsOnceTheSessionEnded(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	evs := make([]outbox.Message, 8)
	for i := range evs {
		evs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", CreatedAt: time.Now()}
	}
	enqueue(t, b, evs...)
	p := stores.ClaimParams{Limit: 16, Now: time.Now().Add(time.Hour), PerKey: 4}
	b1, err := b.store.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Abort(ctx) //nolint:errcheck // no-op after Complete
	if n := len(b1.Records()); n != 4 {
		t.Fatalf("claim took %d, want k1's first 4", n)
	}
	b2, err := b1.(stores.Continuer).Continue(ctx, p)
	if err != nil || b2 == nil {
		t.Fatalf("continue: %v, %v", b2, err)
	}
	defer b2.Abort(ctx) //nolint:errcheck // the session is gone
	var pid int
	err = b2.(stores.TxRunner[pgx.Tx]).RunInTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.(stores.Resumer).Resume(ctx); err != nil {
		t.Fatalf("resume of a live continuation: %v", err)
	}
	var ended bool
	if err := b.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ended); err != nil || !ended {
		t.Fatalf("terminate the continuation's session: %v, %v", ended, err)
	}
	// The backend exits, and releases its locks, a moment after the
	// signal: wait until it is gone.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var alive bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`, pid).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still alive 30s after pg_terminate_backend", pid)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition
	}
	if err := b2.(stores.Resumer).Resume(ctx); err == nil {
		t.Fatal("resume after the session ended: no error")
	}
	var published []uuid.UUID
	for _, r := range b1.Records() {
		published = append(published, r.ID)
	}
	if err := b1.Complete(ctx, stores.Outcome{Now: time.Now(), Published: published, DeletePublished: true}); err != nil {
		t.Fatal(err)
	}
	b3, err := b.store.Claim(ctx, p)
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

// A claim whose key walk takes as many heads as it may (a quarter of the
// batch) continues when those were every key with pending events, as one
// that took fewer does; when one more key waits, it does not, so that key
// is served by the next claim instead of waiting behind the continuations.
func TestContinueAfterAWalkThatTookEveryKey(t *testing.T) {
	for _, c := range []struct {
		keys      int
		continues bool
	}{{4, true}, {5, false}} {
		t.Run(fmt.Sprintf("%d keys", c.keys), func(t *testing.T) {
			b := setup(t)
			ctx := context.Background()
			var evs []outbox.Message
			for i := range 8 {
				for k := range c.keys {
					evs = append(evs, outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprintf("k%d", k),
						Payload: fmt.Appendf(nil, "%d", i), CreatedAt: time.Now()})
				}
			}
			enqueue(t, b, evs...)
			// Heads of 16/4 = 4 keys.
			p := stores.ClaimParams{Limit: 16, Now: time.Now().Add(time.Hour), PerKey: 4}
			b1, err := b.store.Claim(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			defer b1.Abort(ctx) //nolint:errcheck // test cleanup
			keys := map[string]int{}
			for _, r := range b1.Records() {
				keys[r.Key]++
			}
			if len(keys) != 4 || len(b1.Records()) != 16 {
				t.Fatalf("claim took %d records of keys %v, want 4 of each of 4 keys", len(b1.Records()), keys)
			}
			b2, err := b1.(stores.Continuer).Continue(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if !c.continues {
				if b2 != nil {
					_ = b2.Abort(ctx)
					t.Fatalf("the batch continued with %d records while key k4 waits for its first claim", len(b2.Records()))
				}
				return
			}
			if b2 == nil {
				t.Fatal("the batch of every key did not continue")
			}
			defer b2.Abort(ctx) //nolint:errcheck // test cleanup
			next := map[string][]string{}
			for _, r := range b2.Records() {
				next[r.Key] = append(next[r.Key], string(r.Payload))
			}
			for k := range c.keys {
				key := fmt.Sprintf("k%d", k)
				if got := strings.Join(next[key], ","); got != "4,5,6,7" {
					t.Errorf("continuation of %s: %s, want its events 4,5,6,7", key, got)
				}
			}
		})
	}
}
