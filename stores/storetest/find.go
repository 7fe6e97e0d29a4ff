package storetest

import (
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Find (stores.Finder, the dashboard's search) looks an event up by ID in
// any state, and a key's pending and dead events in the key's order; the
// key is matched exactly and a key's published events are not listed.
func testFind(t *testing.T, h Harness) {
	f, ok := h.Store.(stores.Finder)
	if !ok {
		t.Skip("the store has no stores.Finder")
	}
	now := t0.Add(time.Hour)
	pub := msgs("orders", 1)
	pub[0].Key = "k"
	finish(t, h, pub, false, now) // published, kept
	dead := msgs("orders", 1)
	dead[0].Key, dead[0].CreatedAt = "k", t0.Add(time.Second)
	finish(t, h, dead, true, now)
	pending := msgs("orders", 3)
	pending[0].Key, pending[0].CreatedAt = "k", t0.Add(2*time.Second)
	pending[1].Key, pending[1].CreatedAt = "k ", t0.Add(2*time.Second) // a trailing space is another key
	pending[2].NotBefore = now.Add(time.Hour)
	enqueue(t, h, pending)

	find := func(p stores.FindParams) []stores.Found {
		t.Helper()
		got, err := f.Find(ctxT(t), p)
		if err != nil {
			t.Fatalf("find(%+v): %v", p, err)
		}
		return got
	}
	for _, c := range []struct {
		m     outbox.Message
		state stores.State
	}{{pub[0], stores.StatePublished}, {dead[0], stores.StateDead}, {pending[0], stores.StatePending}} {
		got := find(stores.FindParams{ID: c.m.ID})
		if len(got) != 1 || got[0].ID != c.m.ID || got[0].State != c.state || got[0].Key != c.m.Key || got[0].Topic != "orders" {
			t.Fatalf("find(ID of a %s event) = %+v", c.state, got)
		}
	}
	if got := find(stores.FindParams{ID: dead[0].ID})[0]; got.LastError != "refused" || got.Attempts != 1 || !got.DueAt.IsZero() {
		t.Fatalf("the dead event found: error %q, attempts %d, due %v; want refused, 1, none", got.LastError, got.Attempts, got.DueAt)
	}
	if got := find(stores.FindParams{ID: pending[2].ID})[0]; !got.DueAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("the scheduled event found due at %v, want %v", got.DueAt, now.Add(time.Hour))
	}
	got := find(stores.FindParams{Key: "k"})
	if len(got) != 2 || got[0].ID != dead[0].ID || got[1].ID != pending[0].ID || got[1].State != stores.StatePending || got[1].DueAt.IsZero() {
		t.Fatalf("find(key k) = %+v; want its dead event, then its pending one", got)
	}
	if got := find(stores.FindParams{Key: "k", Limit: 1}); len(got) != 1 || got[0].ID != dead[0].ID {
		t.Fatalf("find(key k, limit 1) = %+v; want its dead event only", got)
	}
	if got := find(stores.FindParams{ID: outbox.NewID()}); len(got) != 0 {
		t.Fatalf("find(an unknown ID) = %+v; want nothing", got)
	}
	if got := find(stores.FindParams{Key: "nobody"}); len(got) != 0 {
		t.Fatalf("find(an unknown key) = %+v; want nothing", got)
	}
}
