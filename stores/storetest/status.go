package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// statsAt is Stats as of now, by topic.
func statsAt(t *testing.T, s stores.Store, now time.Time) map[string]stores.TopicStats {
	t.Helper()
	st, err := s.Stats(ctxT(t), stores.StatsParams{Now: now})
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	out := map[string]stores.TopicStats{}
	for _, ts := range st {
		if _, dup := out[ts.Topic]; dup {
			t.Fatalf("stats: topic %q listed twice", ts.Topic)
		}
		if ts.Due+ts.Scheduled != ts.Pending {
			t.Fatalf("topic %q: due %d + scheduled %d != pending %d", ts.Topic, ts.Due, ts.Scheduled, ts.Pending)
		}
		out[ts.Topic] = ts
	}
	return out
}

// Pending events are due or scheduled as of the caller's clock: a
// NotBefore far ahead, or a retry's backoff, is scheduled, not lag.
func testStatsDueScheduledRetrying(t *testing.T, h Harness) {
	now := t0.Add(time.Hour)
	m := msgs("a", 4)
	m[0].CreatedAt = t0.Add(-2 * time.Hour) // scheduled a day ahead
	m[0].NotBefore = now.Add(24 * time.Hour)
	m[1].CreatedAt = t0.Add(-time.Hour)  // fails, retried a minute later
	m[2].CreatedAt = t0                  // due, never tried
	m[3].CreatedAt = t0.Add(time.Second) // fails, retried at once
	done := msgs("b", 2)
	enqueue(t, h, append(m, done...))

	b := claim(t, h.Store, 10, now)
	if !sameIDs(b.Records(), m[1], m[2], m[3], done[0], done[1]) {
		t.Fatalf("claim at now: got %v, want every record but the one scheduled ahead", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now,
		Published: []uuid.UUID{done[0].ID},
		Retry: []stores.Failure{
			{ID: m[1].ID, Err: "later", NextAttempt: now.Add(time.Minute)},
			{ID: m[3].ID, Err: "at once", NextAttempt: now},
		},
		Dead: []stores.Failure{{ID: done[1].ID, Err: "refused"}},
	})

	check := func(at time.Time, due, retrying int64, oldestDue time.Time) {
		t.Helper()
		st := statsAt(t, h.Store, at)
		a := st["a"]
		if a.Pending != 4 || a.Due != due || a.Scheduled != 4-due || a.Retrying != retrying ||
			!a.OldestPending.Equal(m[0].CreatedAt) || !a.OldestDue.Equal(oldestDue) {
			t.Errorf("at now%+v: topic a: %+v\nwant pending 4, due %d, scheduled %d, retrying %d, oldest pending %v, oldest due %v",
				at.Sub(now), a, due, 4-due, retrying, m[0].CreatedAt, oldestDue)
		}
		if b := st["b"]; b.Pending != 0 || b.Due != 0 || b.Scheduled != 0 || b.Retrying != 0 ||
			!b.OldestPending.IsZero() || !b.OldestDue.IsZero() || b.Dead != 1 || b.Published != 1 {
			t.Errorf("at now%+v: topic b: %+v, want 1 published, 1 dead, nothing pending", at.Sub(now), b)
		}
	}
	// Due is at or before Now: m[3]'s retry is due at now exactly.
	check(now, 2, 2, m[2].CreatedAt)
	check(now.Add(time.Minute), 3, 2, m[1].CreatedAt)
	check(now.Add(25*time.Hour), 4, 2, m[0].CreatedAt)
	check(t0.Add(-3*time.Hour), 0, 2, time.Time{})
}

// A keyed head that failed holds its key back, and Blocked lists it; an
// unkeyed failure, a key whose failed head has since been published, and
// a key whose head never failed are not blocked.
func testBlocked(t *testing.T, h Harness) {
	now := t0.Add(time.Hour)
	k1 := keyed("orders", "k1", 3, t0)
	k2 := keyed("payments", "k2", 2, t0.Add(time.Millisecond)) // a later head, another topic
	k3 := keyed("orders", "k3", 2, t0.Add(2*time.Millisecond))
	k4 := keyed("orders", "k4", 1, t0.Add(3*time.Millisecond))
	u := msgs("orders", 1)
	u[0].CreatedAt = t0.Add(-time.Hour)
	var all []outbox.Message
	for _, g := range [][]outbox.Message{k1, k2, k3, k4, u} {
		all = append(all, g...)
	}
	enqueue(t, h, all)
	if bl, err := h.Store.Blocked(ctxT(t), stores.BlockedParams{}); err != nil || len(bl) != 0 {
		t.Fatalf("nothing failed yet, blocked: %+v (err %v)", bl, err)
	}

	b := claim(t, h.Store, 100, now)
	if !sameIDs(b.Records(), k1[0], k2[0], k3[0], k4[0], u[0]) {
		t.Fatalf("first claim: got %v, want each key's head and the unkeyed one", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now, Retry: []stores.Failure{
		{ID: k1[0].ID, Err: "no stream captures subject orders", NextAttempt: now.Add(time.Minute)},
		{ID: k2[0].ID, Err: "payments refused", NextAttempt: now.Add(2 * time.Minute)},
		{ID: k3[0].ID, Err: "transient", NextAttempt: now},
		{ID: u[0].ID, Err: "unkeyed refused", NextAttempt: now.Add(time.Minute)},
	}})
	b = claim(t, h.Store, 100, now)
	if !sameIDs(b.Records(), k3[0], k4[0]) {
		t.Fatalf("second claim: got %v, want k3's head (retried at once) and k4's", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now, Published: []uuid.UUID{k3[0].ID}})

	bl, err := h.Store.Blocked(ctxT(t), stores.BlockedParams{})
	if err != nil {
		t.Fatalf("blocked: %v", err)
	}
	want := []struct {
		head   outbox.Message
		err    string
		next   time.Time
		behind int64
	}{
		{k1[0], "no stream captures subject orders", now.Add(time.Minute), 2},
		{k2[0], "payments refused", now.Add(2 * time.Minute), 1},
	}
	if len(bl) != len(want) {
		t.Fatalf("blocked: %d keys %+v, want k1 and k2", len(bl), bl)
	}
	for i, w := range want {
		g := bl[i]
		if g.Head.ID != w.head.ID || g.Head.Topic != w.head.Topic || g.Head.Key != w.head.Key ||
			g.Head.Type != w.head.Type || !g.Head.CreatedAt.Equal(w.head.CreatedAt) ||
			g.Head.Attempts != 1 || g.Head.LastError != w.err || !g.NextAttempt.Equal(w.next) || g.Behind != w.behind ||
			len(g.Head.Payload) != 0 {
			t.Errorf("blocked[%d] = %+v\nwant head %s (%s/%s), attempts 1, last error %q, next attempt %v, %d behind, no payload",
				i, g, w.head.ID, w.head.Topic, w.head.Key, w.err, w.next, w.behind)
		}
	}
	if bl, err := h.Store.Blocked(ctxT(t), stores.BlockedParams{Limit: 1}); err != nil || len(bl) != 1 || bl[0].Head.ID != k1[0].ID {
		t.Fatalf("blocked, limit 1: %+v (err %v), want k1's head alone", bl, err)
	}

	// k1's head goes through at its retry: k1 is no longer blocked.
	b = claim(t, h.Store, 100, now.Add(time.Minute))
	if !sameIDs(b.Records(), k1[0], k3[1], k4[0], u[0]) {
		t.Fatalf("claim at k1's retry: got %v", ids(b.Records()))
	}
	complete(t, b, stores.Outcome{Now: now, Published: []uuid.UUID{k1[0].ID}})
	if bl, err := h.Store.Blocked(ctxT(t), stores.BlockedParams{}); err != nil || len(bl) != 1 || bl[0].Head.ID != k2[0].ID {
		t.Fatalf("after k1's head was published, blocked: %+v (err %v), want k2 alone", bl, err)
	}
}
