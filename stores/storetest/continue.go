package storetest

import (
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// continuer returns b as a stores.Continuer, or skips the case: the
// capability is optional.
func continuer(t *testing.T, b stores.Batch) stores.Continuer {
	t.Helper()
	c, ok := b.(stores.Continuer)
	if !ok {
		t.Skip("the store's batches do not implement stores.Continuer")
	}
	return c
}

// continueP continues c, resumes what it returns and aborts it at the
// end of the test.
func continueP(t *testing.T, c stores.Continuer, p stores.ClaimParams) stores.Batch {
	t.Helper()
	ctx := ctxT(t)
	b, err := c.Continue(ctx, p)
	if err != nil {
		t.Fatalf("continue: %v", err)
	}
	if b == nil {
		return nil
	}
	t.Cleanup(func() { _ = b.Abort(ctx) })
	r, ok := b.(stores.Resumer)
	if !ok {
		t.Fatal("a continuation does not implement stores.Resumer")
	}
	if err := r.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	return b
}

// A continuation, claimed while its batch is held, takes each key's next
// records right after the batch's, and so on until the keys run dry; no
// other claim takes any of them meanwhile, before or after the batch
// before it completes.
func testContinueFollowsRuns(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 10, t0)
	c := keyed("orders", "k2", 6, t0.Add(time.Millisecond))
	enqueue(t, h, append(a, c...))
	now := t0.Add(time.Hour)
	p := stores.ClaimParams{Limit: 40, Now: now, PerKey: 4}
	b1 := claimP(t, h.Store, p)
	if !sameIDs(b1.Records(), append(a[:4:4], c[:4]...)...) {
		t.Fatalf("claim: got %v, want the first 4 of k1 and k2", ids(b1.Records()))
	}
	b2 := continueP(t, continuer(t, b1), p)
	if b2 == nil || !sameIDs(b2.Records(), append(a[4:8:8], c[4:]...)...) {
		t.Fatalf("continuation: got %v, want k1's records 5 to 8 and k2's 5 and 6", recIDs(b2))
	}
	checkKeyOrder(t, b2.Records(), map[string][]outbox.Message{"k1": a, "k2": c})
	if b := claimP(t, h.Store, p); len(b.Records()) != 0 {
		t.Fatalf("while both are held, a claim took %v", ids(b.Records()))
	}
	complete(t, b1, stores.Outcome{Now: now, Published: ids(b1.Records()), DeletePublished: true})
	if b := claimP(t, h.Store, p); len(b.Records()) != 0 {
		t.Fatalf("after the first batch completed, a claim took %v: the continuation holds the keys' heads", ids(b.Records()))
	}
	b3 := continueP(t, continuer(t, b2), p)
	if b3 == nil || !sameIDs(b3.Records(), a[8:]...) {
		t.Fatalf("second continuation: got %v, want k1's last 2 (k2 has run dry)", recIDs(b3))
	}
	complete(t, b2, stores.Outcome{Now: now, Published: ids(b2.Records()), DeletePublished: true})
	if b4 := continueP(t, continuer(t, b3), p); b4 != nil {
		t.Fatalf("continuation of the last records: got %v, want none", ids(b4.Records()))
	}
}

// A batch that ends without completing (aborted, as the relay does when
// the broker goes away mid-batch, or its session killed) frees its
// records while its continuation still holds the ones right after them.
// A fresh claim then takes the key again from its head, and its run must
// stop where the continuation's records begin: taking the records after
// those would publish them first.
func testContinuationOutlivesItsBatch(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 12, t0)
	enqueue(t, h, a)
	now := t0.Add(time.Hour)
	p := stores.ClaimParams{Limit: 40, Now: now, PerKey: 4}
	b1 := claimP(t, h.Store, p)
	if !sameIDs(b1.Records(), a[:4]...) {
		t.Fatalf("claim: got %v, want k1's first 4", ids(b1.Records()))
	}
	b2 := continueP(t, continuer(t, b1), p)
	if b2 == nil || !sameIDs(b2.Records(), a[4:8]...) {
		t.Fatalf("continuation: got %v, want k1's records 5 to 8", recIDs(b2))
	}
	if err := b1.Abort(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b3 := claimP(t, h.Store, stores.ClaimParams{Limit: 40, Now: now, PerKey: 12})
	if !sameIDs(b3.Records(), a[:4]...) {
		t.Fatalf("claim after the first batch was aborted, its continuation still held: got %v, want k1's first 4 only", ids(b3.Records()))
	}
}

// The relay claims a batch's continuation while the batch is published and
// completed, so the continuation's claim may come after the batch
// completed and a fresh claim took the key's next records. It must then
// take nothing of the key: the records after the fresh claim's would go
// out first.
func testContinueAfterItsBatchCompleted(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 16, t0)
	enqueue(t, h, a)
	now := t0.Add(time.Hour)
	p := stores.ClaimParams{Limit: 40, Now: now, PerKey: 4}
	b1 := claimP(t, h.Store, p)
	if !sameIDs(b1.Records(), a[:4]...) {
		t.Fatalf("claim: got %v, want k1's first 4", ids(b1.Records()))
	}
	c := continuer(t, b1)
	complete(t, b1, stores.Outcome{Now: now, Published: ids(b1.Records()), DeletePublished: true})
	b2 := claimP(t, h.Store, p)
	if !sameIDs(b2.Records(), a[4:8]...) {
		t.Fatalf("fresh claim after the first batch completed: got %v, want k1's records 5 to 8", ids(b2.Records()))
	}
	if got := continueP(t, c, stores.ClaimParams{Limit: 40, Now: now, PerKey: 12}); got != nil && len(got.Records()) > 0 {
		t.Fatalf("continuation claimed after a fresh claim took the key's next records: got %v, want none", ids(got.Records()))
	}
}

// A continuation stops before a record that is not due, and before one
// another batch holds, as a claim's run does.
func testContinueStopsAtNotDue(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 6, t0)
	a[4].NotBefore = t0.Add(2 * time.Hour)
	enqueue(t, h, a)
	p := stores.ClaimParams{Limit: 40, Now: t0.Add(time.Hour), PerKey: 2}
	b1 := claimP(t, h.Store, p)
	if !sameIDs(b1.Records(), a[:2]...) {
		t.Fatalf("claim: got %v, want k1's first 2", ids(b1.Records()))
	}
	b2 := continueP(t, continuer(t, b1), p)
	if b2 == nil || !sameIDs(b2.Records(), a[2:4]...) {
		t.Fatalf("continuation: got %v, want k1's records 3 and 4", recIDs(b2))
	}
	if b3 := continueP(t, continuer(t, b2), p); b3 != nil {
		t.Fatalf("continuation before a record not due: got %v, want none", ids(b3.Records()))
	}
}

// A claim that took as many keys as it could may have passed over keys
// that wait, and an unordered one holds no runs: neither is continued.
func testContinueOnlyWhatCovers(t *testing.T, h Harness) {
	var all []outbox.Message
	for i, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		all = append(all, keyed("orders", k, 3, t0.Add(time.Duration(i)*time.Millisecond))...)
	}
	enqueue(t, h, all)
	now := t0.Add(time.Hour)
	// Limit 8 with runs allows 2 heads: 3 keys wait.
	p := stores.ClaimParams{Limit: 8, Now: now, PerKey: 2}
	b1 := claimP(t, h.Store, p)
	if got := continueP(t, continuer(t, b1), p); got != nil {
		t.Fatalf("continuation of a claim that reached its key limit: got %v, want none", ids(got.Records()))
	}
	if err := b1.Abort(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	u := stores.ClaimParams{Limit: 40, Now: now, Unordered: true}
	b2 := claimP(t, h.Store, u)
	if got := continueP(t, continuer(t, b2), u); got != nil {
		t.Fatalf("continuation of an unordered claim: got %v, want none", ids(got.Records()))
	}
}

// A batch whose runs all ended before their share of the batch — the keys
// had nothing more, as at a trickle — is not continued: a fresh claim
// takes what comes next.
func testContinueNotAtATrickle(t *testing.T, h Harness) {
	a := keyed("orders", "k1", 2, t0)
	enqueue(t, h, a)
	now := t0.Add(time.Hour)
	p := stores.ClaimParams{Limit: 40, Now: now, PerKey: 10}
	b1 := claimP(t, h.Store, p)
	if !sameIDs(b1.Records(), a...) {
		t.Fatalf("claim: got %v, want k1's 2", ids(b1.Records()))
	}
	later := keyed("orders", "k1", 1, t0.Add(time.Second))
	enqueue(t, h, later)
	if got := continueP(t, continuer(t, b1), p); got != nil {
		t.Fatalf("continuation of runs that were not full: got %v, want none", ids(got.Records()))
	}
	complete(t, b1, stores.Outcome{Now: now, Published: ids(b1.Records()), DeletePublished: true})
	if b := claimP(t, h.Store, p); !sameIDs(b.Records(), later...) {
		t.Fatalf("fresh claim: got %v, want k1's later event", ids(b.Records()))
	}
}

func recIDs(b stores.Batch) any {
	if b == nil {
		return "no batch"
	}
	return ids(b.Records())
}
