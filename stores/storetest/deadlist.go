package storetest

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// finish enqueues m, claims all of it (unordered, so keyed records come
// too) and completes it: dead with the error "refused" when dead, else
// published, at now.
func finish(t *testing.T, h Harness, m []outbox.Message, dead bool, now time.Time) {
	t.Helper()
	enqueue(t, h, m)
	b, err := h.Store.Claim(ctxT(t), stores.ClaimParams{Limit: len(m) + 10, Now: now, Unordered: true})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() { _ = b.Abort(ctxT(t)) })
	if len(b.Records()) != len(m) {
		t.Fatalf("claimed %d records, want %d", len(b.Records()), len(m))
	}
	o := stores.Outcome{Now: now}
	for _, r := range b.Records() {
		if dead {
			o.Dead = append(o.Dead, stores.Failure{ID: r.ID, Err: "refused"})
		} else {
			o.Published = append(o.Published, r.ID)
		}
	}
	complete(t, b, o)
}

// listOrder sorts m as the dead list orders it: by CreatedAt, then ID.
func listOrder(m []outbox.Message) []outbox.Message {
	out := slices.Clone(m)
	slices.SortFunc(out, func(a, b outbox.Message) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	return out
}

func deadIDs(t *testing.T, h Harness, p stores.DeadParams) []uuid.UUID {
	t.Helper()
	got, err := h.Store.Dead(ctxT(t), p)
	if err != nil {
		t.Fatalf("dead(%+v): %v", p, err)
	}
	return ids(got)
}

func deadCount(t *testing.T, h Harness, p stores.DeadParams) int64 {
	t.Helper()
	n, err := h.Store.DeadCount(ctxT(t), p)
	if err != nil {
		t.Fatalf("dead count(%+v): %v", p, err)
	}
	return n
}

func msgIDs(m []outbox.Message) []uuid.UUID { return ids(recordsOf(m)) }

// Discard deletes the named dead records and nothing else; no IDs, nothing.
func testDiscard(t *testing.T, h Harness) {
	now := t0.Add(time.Hour)
	dead := msgs("orders", 4)
	finish(t, h, dead, true, now)
	published := msgs("orders", 1)
	published[0].CreatedAt = t0.Add(time.Second)
	finish(t, h, published, false, now)
	pending := msgs("orders", 1)
	pending[0].CreatedAt = t0.Add(2 * time.Second)
	enqueue(t, h, pending)

	discard := func(want int64, named ...uuid.UUID) {
		t.Helper()
		n, err := h.Store.Discard(ctxT(t), stores.DiscardParams{IDs: named})
		if err != nil || n != want {
			t.Fatalf("discard(%v): n=%d err=%v, want %d", named, n, err, want)
		}
	}
	discard(0)
	discard(0, []uuid.UUID{}...)
	discard(0, published[0].ID, pending[0].ID, outbox.NewID())
	discard(2, dead[1].ID, dead[3].ID, dead[1].ID, pending[0].ID)
	discard(0, dead[1].ID)
	if got := deadIDs(t, h, stores.DeadParams{}); !slices.Equal(got, msgIDs([]outbox.Message{dead[0], dead[2]})) {
		t.Fatalf("dead after discard: %v, want %v and %v", got, dead[0].ID, dead[2].ID)
	}
	st := stats(t, h.Store)["orders"]
	if st.Dead != 2 || st.Published != 1 || st.Pending != 1 {
		t.Fatalf("stats after discard: %+v, want 2 dead, 1 published, 1 pending", st)
	}
}

// Dead filters by key and age, DeadCount counts what every page would list.
func testDeadFilters(t *testing.T, h Harness) {
	m := msgs("orders", 6)
	for i := range m {
		m[i].Key = []string{"k1", "k2", ""}[i%3]
		m[i].CreatedAt = t0.Add(time.Duration(i) * time.Minute)
	}
	other := msgs("payments", 2)
	for i := range other {
		other[i].Key = "k1"
		other[i].CreatedAt = t0.Add(time.Duration(i)*time.Minute + time.Second)
	}
	finish(t, h, append(slices.Clone(m), other...), true, t0.Add(time.Hour))
	pending := msgs("orders", 1)
	pending[0].Key = "k1"
	enqueue(t, h, pending)

	cases := []struct {
		p    stores.DeadParams
		want []outbox.Message
	}{
		{stores.DeadParams{Key: "k1"}, []outbox.Message{m[0], other[0], other[1], m[3]}},
		{stores.DeadParams{Key: "k1", Topic: "orders"}, []outbox.Message{m[0], m[3]}},
		{stores.DeadParams{Key: "k1 "}, nil},
		{stores.DeadParams{CreatedBefore: t0.Add(2 * time.Minute)}, []outbox.Message{m[0], other[0], m[1], other[1]}},
		{stores.DeadParams{CreatedBefore: t0.Add(2 * time.Minute), Key: "k2"}, []outbox.Message{m[1]}},
		{stores.DeadParams{CreatedBefore: t0}, nil},
		{stores.DeadParams{Topic: "orders", IDs: msgIDs([]outbox.Message{m[5], other[0], m[2], pending[0]})}, []outbox.Message{m[2], m[5]}},
		{stores.DeadParams{}, listOrder(append(slices.Clone(m), other...))},
	}
	for _, c := range cases {
		if got := deadIDs(t, h, c.p); !slices.Equal(got, msgIDs(c.want)) {
			t.Errorf("dead(topic %q, key %q, before %v, %d ids) = %v, want %v",
				c.p.Topic, c.p.Key, c.p.CreatedBefore, len(c.p.IDs), got, msgIDs(c.want))
		}
		// The count ignores the page's bounds.
		c.p.Limit = 1
		c.p.After = &stores.DeadCursor{CreatedAt: t0.Add(-time.Hour)}
		if n := deadCount(t, h, c.p); n != int64(len(c.want)) {
			t.Errorf("dead count(topic %q, key %q, before %v, %d ids) = %d, want %d",
				c.p.Topic, c.p.Key, c.p.CreatedBefore, len(c.p.IDs), n, len(c.want))
		}
	}
}

// Paging with a cursor lists every dead record once, in order, even with
// records of one CreatedAt across a page boundary and dead records added
// and discarded between pages.
func testDeadPaging(t *testing.T, h Harness) {
	m := msgs("orders", 7)
	for i := range m {
		m[i].CreatedAt = t0.Add(time.Duration(i/3) * time.Second) // three share each time
	}
	finish(t, h, m, true, t0.Add(time.Hour))
	order := listOrder(m)

	var got []uuid.UUID
	var after *stores.DeadCursor
	for page := 0; ; page++ {
		recs, err := h.Store.Dead(ctxT(t), stores.DeadParams{Limit: 2, After: after})
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if len(recs) == 0 {
			break
		}
		got = append(got, ids(recs)...)
		c := recs[len(recs)-1].Cursor()
		after = &c
		if page == 0 {
			// Between pages: a record dies that sorts before the cursor (it
			// must not shift the next page), one that sorts after it (the
			// pages reach it), and one the next page would have shown is
			// discarded.
			before, later := msgs("orders", 1), msgs("orders", 1)
			before[0].CreatedAt = t0.Add(-time.Second)
			later[0].CreatedAt = t0.Add(time.Minute)
			finish(t, h, append(before, later...), true, t0.Add(time.Hour))
			if n, err := h.Store.Discard(ctxT(t), stores.DiscardParams{IDs: []uuid.UUID{order[2].ID}}); err != nil || n != 1 {
				t.Fatalf("discard: n=%d err=%v", n, err)
			}
			order = append(slices.Delete(order, 2, 3), later[0])
		}
		if page > 10 {
			t.Fatal("paging does not end")
		}
	}
	if !slices.Equal(got, msgIDs(order)) {
		t.Fatalf("pages listed\n %v\nwant\n %v", got, msgIDs(order))
	}
}

// Purge deletes dead records past their own bound, by CreatedAt, apart
// from published ones.
func testPurgeDead(t *testing.T, h Harness) {
	now := t0.Add(time.Hour)
	dead := msgs("orders", 5)
	for i := range dead {
		dead[i].CreatedAt = t0.Add(time.Duration(i) * time.Minute)
	}
	finish(t, h, dead, true, now)
	pub := msgs("orders", 2)
	finish(t, h, pub, false, now)
	pending := msgs("orders", 1)
	enqueue(t, h, pending)

	purge := func(p stores.PurgeParams, want int64) {
		t.Helper()
		n, err := h.Store.Purge(ctxT(t), p)
		if err != nil || n != want {
			t.Fatalf("purge(%+v): n=%d err=%v, want %d", p, n, err, want)
		}
	}
	purge(stores.PurgeParams{}, 0)
	purge(stores.PurgeParams{DeadBefore: t0}, 0)
	purge(stores.PurgeParams{DeadBefore: t0.Add(3 * time.Minute), Limit: 2}, 2)
	if st := stats(t, h.Store)["orders"]; st.Dead != 3 || st.Published != 2 || st.Pending != 1 {
		t.Fatalf("stats after purging dead: %+v, want 3 dead, 2 published, 1 pending", st)
	}
	purge(stores.PurgeParams{DeadBefore: t0.Add(3 * time.Minute), Before: now.Add(time.Second)}, 3)
	if got := deadIDs(t, h, stores.DeadParams{}); !slices.Equal(got, msgIDs(dead[3:])) {
		t.Fatalf("dead after purge: %v, want %v", got, msgIDs(dead[3:]))
	}
	if st := stats(t, h.Store)["orders"]; st.Dead != 2 || st.Published != 0 || st.Pending != 1 {
		t.Fatalf("stats after purge: %+v, want 2 dead, 1 pending", st)
	}
}

// Republish makes published records of a CreatedAt range pending again,
// with their IDs, oldest first and bounded; the relay sends them again.
func testRepublish(t *testing.T, h Harness) {
	now := t0.Add(time.Hour)
	m := msgs("orders", 6)
	for i := range m {
		m[i].Key = []string{"k1", "k2"}[i%2]
		m[i].CreatedAt = t0.Add(time.Duration(i) * time.Minute)
	}
	other := msgs("payments", 1)
	other[0].CreatedAt = t0.Add(90 * time.Second)
	finish(t, h, append(slices.Clone(m), other...), false, now)
	dead := msgs("orders", 1)
	dead[0].CreatedAt = t0.Add(30 * time.Second)
	finish(t, h, dead, true, now)

	republish := func(p stores.RepublishParams, want int64) {
		t.Helper()
		p.Now = now.Add(time.Minute)
		n, err := h.Store.Republish(ctxT(t), p)
		if err != nil || n != want {
			t.Fatalf("republish(%v..%v topic %q key %q limit %d): n=%d err=%v, want %d",
				p.From, p.To, p.Topic, p.Key, p.Limit, n, err, want)
		}
	}
	if _, err := h.Store.Republish(ctxT(t), stores.RepublishParams{From: t0, To: t0, Now: now}); err == nil {
		t.Fatal("republish of an empty range: no error")
	}
	// Nothing published was created then.
	republish(stores.RepublishParams{From: t0.Add(-time.Hour), To: t0}, 0)
	republish(stores.RepublishParams{From: t0, To: t0.Add(10 * time.Minute), Key: "k3"}, 0)
	// [1m, 5m) of orders, key k2: m[1] and m[3]; one at a time.
	republish(stores.RepublishParams{From: t0.Add(time.Minute), To: t0.Add(5 * time.Minute), Topic: "orders", Key: "k2", Limit: 1}, 1)
	republish(stores.RepublishParams{From: t0.Add(time.Minute), To: t0.Add(5 * time.Minute), Topic: "orders", Key: "k2", Limit: 5}, 1)
	republish(stores.RepublishParams{From: t0.Add(time.Minute), To: t0.Add(5 * time.Minute), Topic: "orders", Key: "k2"}, 0)
	// [1m, 2m) of every topic: m[1] is pending already, other[0] is not.
	republish(stores.RepublishParams{From: t0.Add(time.Minute), To: t0.Add(2 * time.Minute)}, 1)

	st := stats(t, h.Store)
	if st["orders"].Pending != 2 || st["orders"].Published != 4 || st["orders"].Dead != 1 || st["payments"].Pending != 1 {
		t.Fatalf("stats after republish: %+v, want orders 2 pending, 4 published, 1 dead; payments 1 pending", st)
	}
	// Not due before p.Now; then claimed, ordered by key as ever, with
	// zero attempts and the same IDs.
	if c := claim(t, h.Store, 10, now); len(c.Records()) != 0 {
		t.Fatalf("republished records claimed before they are due: %d", len(c.Records()))
	}
	var got []uuid.UUID
	for i := 0; i < 10; i++ {
		b := claim(t, h.Store, 10, now.Add(time.Minute))
		if len(b.Records()) == 0 {
			break
		}
		for _, r := range b.Records() {
			if r.Attempts != 0 {
				t.Errorf("republished %s has %d attempts, want 0", r.ID, r.Attempts)
			}
		}
		got = append(got, ids(b.Records())...)
		complete(t, b, stores.Outcome{Now: now.Add(time.Minute), Published: ids(b.Records())})
	}
	if len(got) != 3 || !slices.Contains(got, other[0].ID) ||
		slices.Index(got, m[1].ID) < 0 || slices.Index(got, m[1].ID) > slices.Index(got, m[3].ID) {
		t.Fatalf("claimed after republish %v, want m[1] %v before m[3] %v, and %v", got, m[1].ID, m[3].ID, other[0].ID)
	}
	if st := stats(t, h.Store)["orders"]; st.Pending != 0 || st.Published != 6 {
		t.Fatalf("stats after publishing again: %+v, want 6 published", st)
	}
	// Published rows are purged by their new publish time.
	if n, err := h.Store.Purge(ctxT(t), stores.PurgeParams{Before: now.Add(time.Second)}); err != nil || n != 4 {
		t.Fatalf("purge of the first publish: n=%d err=%v, want 4", n, err)
	}
}
