package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Dead-lettering by hand keeps the broker's last refusal beside the reason.
func testDeadLetterKeepsLastError(t *testing.T, h Harness) {
	m := msgs("orders", 4)
	enqueue(t, h, m)
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 10, now)
	complete(t, b, stores.Outcome{Now: now, Retry: []stores.Failure{
		{ID: m[0].ID, Err: "nats: no responders available for request", NextAttempt: now.Add(time.Hour)},
		{ID: m[2].ID, Err: "refused", NextAttempt: now.Add(time.Hour)},
	}})
	n, err := h.Store.DeadLetter(ctxT(t), stores.DeadLetterParams{IDs: []uuid.UUID{m[0].ID, m[1].ID}, Reason: "dead-lettered by hand"})
	if err != nil || n != 2 {
		t.Fatalf("dead-letter: n=%d err=%v, want 2", n, err)
	}
	// An empty reason leaves the last error as it was.
	n, err = h.Store.DeadLetter(ctxT(t), stores.DeadLetterParams{IDs: []uuid.UUID{m[2].ID, m[3].ID}})
	if err != nil || n != 2 {
		t.Fatalf("dead-letter without a reason: n=%d err=%v, want 2", n, err)
	}
	dead, err := h.Store.Dead(ctxT(t), stores.DeadParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		attempts int
		err      string
	}{
		{1, "dead-lettered by hand; last error: nats: no responders available for request"},
		{0, "dead-lettered by hand"},
		{1, "refused"},
		{0, ""},
	}
	if len(dead) != len(want) {
		t.Fatalf("dead: %d records, want %d: %+v", len(dead), len(want), dead)
	}
	for i, w := range want {
		if d := dead[i]; d.ID != m[i].ID || d.Attempts != w.attempts || d.LastError != w.err {
			t.Errorf("dead[%d] = %s, attempts %d, last error %q; want %s, attempts %d, %q",
				i, d.ID, d.Attempts, d.LastError, m[i].ID, w.attempts, w.err)
		}
	}
}

// Dead lists the named dead records only, with the other filters applied.
func testDeadByIDs(t *testing.T, h Harness) {
	a := msgs("a", 3)
	b := msgs("b", 2)
	for i := range b {
		b[i].CreatedAt = t0.Add(time.Duration(10+i) * time.Second)
	}
	pending := msgs("a", 1)[0]
	pending.CreatedAt = t0.Add(time.Minute)
	enqueue(t, h, append(append(a, b...), pending))
	now := t0.Add(time.Hour)
	c := claim(t, h.Store, 10, now)
	var fs []stores.Failure
	for _, m := range append(a, b...) {
		fs = append(fs, stores.Failure{ID: m.ID, Err: "refused"})
	}
	complete(t, c, stores.Outcome{Now: now, Dead: fs})

	dead := func(p stores.DeadParams, want ...outbox.Message) {
		t.Helper()
		got, err := h.Store.Dead(ctxT(t), p)
		if err != nil {
			t.Fatalf("dead(%+v): %v", p, err)
		}
		if !slices.Equal(ids(got), ids(recordsOf(want))) {
			t.Errorf("dead(ids %v, topic %q, limit %d) = %v, want %v", p.IDs, p.Topic, p.Limit, ids(got), ids(recordsOf(want)))
		}
	}
	dead(stores.DeadParams{IDs: []uuid.UUID{b[1].ID, a[0].ID, a[2].ID}}, a[0], a[2], b[1])
	dead(stores.DeadParams{IDs: []uuid.UUID{b[1].ID, a[0].ID, a[2].ID}, Topic: "b"}, b[1])
	dead(stores.DeadParams{IDs: []uuid.UUID{b[1].ID, a[0].ID, a[2].ID}, Limit: 2}, a[0], a[2])
	dead(stores.DeadParams{IDs: []uuid.UUID{pending.ID, outbox.NewID()}})
	dead(stores.DeadParams{}, a[0], a[1], a[2], b[0], b[1])
}
