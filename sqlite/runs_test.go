package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// keyedMsgs returns n events of key, in the key's order.
func keyedMsgs(key string, n int) []outbox.Message {
	out := testMsgs(n)
	for i := range out {
		out[i].Key = key
		out[i].CreatedAt = t0.Add(time.Duration(i) * time.Microsecond)
	}
	return out
}

func claimRuns(t *testing.T, s stores.Store, p stores.ClaimParams) stores.Batch {
	t.Helper()
	b, err := s.Claim(context.Background(), p)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return b
}

func msgIDs(ms []outbox.Message) []uuid.UUID {
	out := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// A run ends before a row another batch holds: a relay in unordered mode
// may hold a key's later row while its head is free.
func TestRunStopsAtLeasedRow(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	m := keyedMsgs("k1", 5)
	m[0].NotBefore, m[1].NotBefore = t0.Add(time.Hour), t0.Add(time.Hour)
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	// Only rows 3 to 5 are due: an unordered claim of one takes row 3, and
	// holds it still when rows 1 and 2 are due.
	now := t0.Add(time.Hour)
	u := claimRuns(t, b.store, stores.ClaimParams{Limit: 1, Now: now.Add(-b.store.Config().ClaimTimeout / 2), Unordered: true})
	if got := ids(u); !slices.Equal(got, msgIDs(m[2:3])) {
		t.Fatalf("unordered claim: got %v, want row 3", got)
	}
	o := claimRuns(t, b.store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 10})
	if got := ids(o); !slices.Equal(got, msgIDs(m[:2])) {
		t.Fatalf("ordered claim: got %v, want rows 1 and 2 (row 3 is held)", got)
	}
	if err := u.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(ctx, stores.Outcome{Now: now, Published: ids(o)}); err != nil {
		t.Fatal(err)
	}
	if got := ids(claimRuns(t, b.store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 10})); !slices.Equal(got, msgIDs(m[2:])) {
		t.Fatalf("after both batches: got %v, want rows 3 to 5", got)
	}
}

// A head that waited for a retry is due after the rows behind it: the batch
// still gives the key's records in the key's order.
func TestRunAfterRetriedHead(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	m := keyedMsgs("k1", 3)
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Minute)
	h := claimRuns(t, b.store, stores.ClaimParams{Limit: 10, Now: now})
	if got := ids(h); !slices.Equal(got, msgIDs(m[:1])) {
		t.Fatalf("heads only: got %v, want row 1", got)
	}
	err := h.Complete(ctx, stores.Outcome{Now: now,
		Retry: []stores.Failure{{ID: m[0].ID, Err: "nope", NextAttempt: now.Add(time.Hour)}}})
	if err != nil {
		t.Fatal(err)
	}
	r := claimRuns(t, b.store, stores.ClaimParams{Limit: 10, Now: now.Add(2 * time.Hour), PerKey: 3})
	if got := ids(r); !slices.Equal(got, msgIDs(m)) {
		t.Fatalf("run after a retried head: got %v, want rows 1 to 3 in order", got)
	}
}

// The runs share the room the heads and unkeyed rows left, evenly, the
// batch never holds more than its limit, and each key's rows are its next
// ones; rows left unnamed at Complete are the key's next at the next claim.
func TestRunsShareTheRoom(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	keys := map[string][]outbox.Message{}
	var all []outbox.Message
	for _, k := range []string{"k1", "k2", "k3"} {
		keys[k] = keyedMsgs(k, 10)
		all = append(all, keys[k]...)
	}
	unkeyed := testMsgs(4)
	all = append(all, unkeyed...)
	if err := b.enqueue(ctx, all, true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	next := map[string]int{}
	for round := 0; ; round++ {
		bt := claimRuns(t, b.store, stores.ClaimParams{Limit: 10, Now: now, PerKey: 4})
		recs := bt.Records()
		if len(recs) == 0 {
			break
		}
		if len(recs) > 10 {
			t.Fatalf("round %d: %d records, limit 10", round, len(recs))
		}
		if round == 0 {
			// 2 heads (a quarter of the batch), the 4 unkeyed (half of
			// the 8 left), and the 4 left for the runs: 2 after each head.
			var n int
			for _, r := range recs {
				if r.Key == "" {
					n++
				}
			}
			if n != 4 || len(recs) != 10 {
				t.Fatalf("first claim: %d records, %d unkeyed; want 10, 4", len(recs), n)
			}
		}
		var done []uuid.UUID
		seen := map[string]int{}
		for _, r := range recs {
			if r.Key == "" {
				done = append(done, r.ID)
				continue
			}
			want := keys[r.Key][next[r.Key]+seen[r.Key]].ID
			if r.ID != want {
				t.Fatalf("round %d: key %s: got %v, want its record %d", round, r.Key, r.ID, next[r.Key]+seen[r.Key])
			}
			seen[r.Key]++
			// Publish each key's first record only: the rest stay pending.
			if seen[r.Key] == 1 {
				done = append(done, r.ID)
			}
		}
		for k, n := range seen {
			next[k] += min(n, 1)
		}
		if err := bt.Complete(ctx, stores.Outcome{Now: now, Published: done, DeletePublished: true}); err != nil {
			t.Fatal(err)
		}
		if round > 100 {
			t.Fatal("no progress")
		}
	}
	for k, ms := range keys {
		if next[k] != len(ms) {
			t.Fatalf("key %s: %d of %d published", k, next[k], len(ms))
		}
	}
}

// Of a key with a deep backlog, a claim takes the first PerKey rows (and
// looks at no more than that many after the head, see runsSQL).
func TestRunOfADeepKey(t *testing.T) {
	if testing.Short() {
		t.Skip("enqueues 50,000 events")
	}
	b := setup(t)
	ctx := context.Background()
	m := keyedMsgs("deep", 50000)
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	for _, perKey := range []int{1, 2, 100} {
		t.Run(fmt.Sprint("perKey=", perKey), func(t *testing.T) {
			bt := claimRuns(t, b.store, stores.ClaimParams{Limit: 100, Now: t0.Add(time.Hour), PerKey: perKey})
			if got := ids(bt); !slices.Equal(got, msgIDs(m[:perKey])) {
				t.Fatalf("got %d records, want the key's first %d", len(got), perKey)
			}
			if err := bt.Abort(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
