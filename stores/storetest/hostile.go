package storetest

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
	"github.com/outboxgo/outbox/stores"
)

// hostileTopics are topics a store must keep apart byte for byte, on top of
// hostile.Strings.
var hostileTopics = []string{"orders", "orders ", " orders", "orders\x1b[2J", "ORDERS", "orders\u00a0"}

// Keys, types and topics that a store could trim, fold or compare loosely
// come back byte for byte, and a hostile key keeps its order.
func testHostileRoundTrip(t *testing.T, h Harness) {
	const orderedKey = " padded " // trailing spaces: PAD SPACE collations ignore them
	var all []outbox.Message
	topics := map[string]int{}
	add := func(m outbox.Message) {
		m.ID = outbox.NewID()
		m.Payload = []byte(m.Key)
		m.Headers = map[string]string{"note": "žluťoučký kůň ☃"}
		m.CreatedAt = t0.Add(time.Duration(len(all)) * time.Microsecond)
		all = append(all, m)
		topics[m.Topic]++
	}
	for _, s := range hostile.Strings {
		add(outbox.Message{Topic: s, Key: s, Type: s})
	}
	for _, s := range hostileTopics {
		add(outbox.Message{Topic: s, Key: "key of " + s, Type: s})
	}
	for range 3 {
		add(outbox.Message{Topic: "orders", Key: orderedKey, Type: "Ordered"})
	}
	enqueue(t, h, all)

	st := statsAt(t, h.Store, t0.Add(time.Hour))
	if len(st) != len(topics) {
		t.Errorf("stats: %d topics, want %d: topics were merged or altered", len(st), len(topics))
	}
	for topic, n := range topics {
		if st[topic].Pending != int64(n) {
			t.Errorf("stats of topic %q: %d pending, want %d", topic, st[topic].Pending, n)
		}
	}

	byID := map[uuid.UUID]outbox.Message{}
	pos := map[uuid.UUID]int{}
	for _, m := range all {
		byID[m.ID] = m
		if m.Key == orderedKey {
			pos[m.ID] = len(pos)
		}
	}
	next, seen := 0, 0
	now := t0.Add(time.Hour)
	for round := 0; seen < len(all); round++ {
		if round > len(all) {
			var left []string
			for _, m := range byID {
				left = append(left, m.Key)
			}
			slices.Sort(left)
			t.Fatalf("claimed %d of %d records, then nothing more: never claimed, keys %q", seen, len(all), left)
		}
		b := claim(t, h.Store, 100, now)
		inBatch := 0
		for _, r := range b.Records() {
			w, ok := byID[r.ID]
			if !ok {
				t.Fatalf("claimed an unknown record %s (key %q)", r.ID, r.Key)
			}
			if r.Topic != w.Topic || r.Key != w.Key || r.Type != w.Type || string(r.Payload) != w.Key || !maps.Equal(r.Headers, w.Headers) {
				t.Errorf("record %s came back altered:\n got topic %q key %q type %q\nwant topic %q key %q type %q",
					r.ID, r.Topic, r.Key, r.Type, w.Topic, w.Key, w.Type)
			}
			if p, ok := pos[r.ID]; ok {
				if p != next {
					t.Fatalf("key %q: claimed its record %d, want %d", orderedKey, p, next)
				}
				next++
				if inBatch++; inBatch > 1 {
					t.Fatalf("key %q: two records in one batch", orderedKey)
				}
			}
			delete(byID, r.ID)
			seen++
		}
		complete(t, b, stores.Outcome{Now: now, Published: ids(b.Records()), DeletePublished: true})
	}
}

// A hostile key is listed by Blocked as it was enqueued.
func testHostileBlocked(t *testing.T, h Harness) {
	var all []outbox.Message
	for i, s := range hostile.Strings {
		all = append(all, keyed(s, s, 1, t0.Add(time.Duration(i)*time.Millisecond))...)
	}
	enqueue(t, h, all)
	now := t0.Add(time.Hour)
	b := claim(t, h.Store, 100, now)
	var fs []stores.Failure
	for _, r := range b.Records() {
		fs = append(fs, stores.Failure{ID: r.ID, Err: "refused: " + r.Key, NextAttempt: now.Add(time.Hour)})
	}
	if len(fs) != len(all) {
		got := map[string]bool{}
		for _, r := range b.Records() {
			got[r.Key] = true
		}
		var left []string
		for _, m := range all {
			if !got[m.Key] {
				left = append(left, m.Key)
			}
		}
		t.Fatalf("claimed %d heads, want %d: not claimed, keys %q", len(fs), len(all), left)
	}
	complete(t, b, stores.Outcome{Now: now, Retry: fs})
	bl, err := h.Store.Blocked(ctxT(t), stores.BlockedParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bl) != len(all) {
		t.Fatalf("blocked: %d keys, want %d", len(bl), len(all))
	}
	for i, g := range bl {
		w := all[i]
		if g.Head.ID != w.ID || g.Head.Key != w.Key || g.Head.Topic != w.Topic || g.Head.LastError != "refused: "+w.Key {
			t.Errorf("blocked[%d]: key %q topic %q error %q, want key %q topic %q", i, g.Head.Key, g.Head.Topic, g.Head.LastError, w.Key, w.Topic)
		}
	}
}

// A message with a NUL in its topic, key, type or a header is refused with
// ErrInvalidMessage, and the caller's transaction stays usable: the store
// never sees it (PostgreSQL would fail the statement, SQLSTATE 22021, and
// abort the transaction).
func testEnqueueRefusesNUL(t *testing.T, h Harness) {
	bad := []outbox.Message{
		{Topic: "orders\x00"},
		{Topic: "orders", Key: "k\x00ey"},
		{Topic: "orders", Type: "\x00"},
		{Topic: "orders", Headers: map[string]string{"h": "a\x00b"}},
		{Topic: "orders", Headers: map[string]string{"h\x00": "v"}},
	}
	good := msgs("orders", 1)
	ctx := ctxT(t)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("%s: %v, want ErrInvalidMessage", what, err)
		}
	}
	for i, m := range bad {
		refused("harness enqueue", h.Enqueue(ctx, append(msgs("orders", 1), m), true))
		if h.Begin == nil {
			continue
		}
		tx, err := h.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) }) // a no-op once it has ended
		refused("enqueue in an open transaction", tx.Enqueue(ctx, m))
		if i == len(bad)-1 {
			// The transaction goes on: the next statement and the commit
			// succeed.
			if err := tx.Enqueue(ctx, good[0]); err != nil {
				t.Fatalf("enqueue after a refused message, same transaction: %v", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit after a refused message: %v", err)
			}
		} else if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []outbox.Message{good[0]}
	if h.Begin == nil {
		enqueue(t, h, want)
	}
	b := claim(t, h.Store, 10, t0.Add(time.Hour))
	if !sameIDs(b.Records(), want...) {
		t.Fatalf("claimed %v, want only %v: a refused message was stored", ids(b.Records()), want[0].ID)
	}
}
