package mysql_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
	"github.com/outboxgo/outbox/stores"
)

func messages(topic string, n int, created time.Time) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: topic, Key: fmt.Sprint(i % 5),
			Payload: []byte(fmt.Sprint(i)), CreatedAt: created.Add(time.Duration(i) * time.Microsecond)}
	}
	return out
}

func recIDs(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// A held claim must not hold up writers: under REPEATABLE READ its locking
// read would lock the gaps around the pending rows, and an Enqueue whose row
// falls there would wait for the relay to finish publishing.
func TestClaimDoesNotBlockEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := b.enqueue(ctx, messages("orders", 5, t0), true); err != nil {
		t.Fatal(err)
	}
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour)}) // all of them: the scan ran past the last
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort(ctx) //nolint:errcheck
	if len(c.Records()) != 5 {
		t.Fatalf("claimed %d, want 5", len(c.Records()))
	}
	for _, created := range []time.Time{t0.Add(-time.Hour), t0.Add(2 * time.Microsecond), t0.Add(time.Hour)} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		err := b.enqueue(wctx, messages("orders", 1, created), true)
		cancel()
		if err != nil {
			t.Fatalf("enqueue (created %v) while a claim is held: %v after %v", created, err, time.Since(start))
		}
	}
	if err := c.Complete(ctx, stores.Outcome{Now: t0, Published: recIDs(c.Records())}); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, b)["orders"]; st.Pending != 3 || st.Published != 5 {
		t.Fatalf("stats %+v, want 3 pending, 5 published", st)
	}
}

func stats(t *testing.T, b bundle) map[string]stores.TopicStats {
	t.Helper()
	st, err := b.store.Stats(context.Background(), stores.StatsParams{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stores.TopicStats{}
	for _, ts := range st {
		out[ts.Topic] = ts
	}
	return out
}

// Many failures go in one statement per kind; errors the column cannot take
// as they are (invalid UTF-8, too long) are made storable, not refused.
func TestCompleteManyFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 3000
	m := messages("orders", n, t0) // five keys: claimed Unordered, all at once
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: n, Now: now, Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records()) != n {
		t.Fatalf("claimed %d, want %d", len(c.Records()), n)
	}
	long := strings.Repeat("é", 40000) // 80,000 bytes
	var o stores.Outcome
	o.Now = now
	for i, r := range c.Records() {
		f := stores.Failure{ID: r.ID, Err: fmt.Sprint("failure ", i), NextAttempt: now.Add(time.Duration(i) * time.Millisecond)}
		switch i {
		case 0:
			f.Err = "bad \xff byte"
		case 1:
			f.Err = long
		}
		if i%2 == 0 {
			o.Retry = append(o.Retry, f)
		} else {
			o.Dead = append(o.Dead, f)
		}
	}
	start := time.Now()
	if err := c.Complete(ctx, o); err != nil {
		t.Fatal(err)
	}
	t.Logf("complete with %d retries and %d dead: %v", len(o.Retry), len(o.Dead), time.Since(start))
	if st := stats(t, b)["orders"]; st.Pending != n/2 || st.Dead != n/2 {
		t.Fatalf("stats %+v, want %d pending and %d dead", st, n/2, n/2)
	}
	retried, err := b.store.Claim(ctx, stores.ClaimParams{Limit: n, Now: now.Add(time.Hour), Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer retried.Abort(ctx) //nolint:errcheck
	recs := retried.Records()
	if len(recs) != n/2 {
		t.Fatalf("claimed %d retries, want %d", len(recs), n/2)
	}
	for i, r := range recs {
		want := o.Retry[i]
		if r.ID != want.ID || r.Attempts != 1 || (i > 0 && r.LastError != want.Err) {
			t.Fatalf("retry %d: %s attempts %d error %q, want %s attempts 1 error %q", i, r.ID, r.Attempts, r.LastError, want.ID, want.Err)
		}
	}
	if recs[0].LastError != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 stored as %q", recs[0].LastError)
	}
	dead, err := b.store.Dead(ctx, stores.DeadParams{Topic: "orders", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || dead[0].ID != o.Dead[0].ID || !utf8.ValidString(dead[0].LastError) ||
		len(dead[0].LastError) > 65535 || !strings.HasPrefix(long, dead[0].LastError) || dead[1].LastError != o.Dead[1].Err {
		t.Fatalf("dead: %d records, first error %d bytes", len(dead), len(dead[0].LastError))
	}
}

// Topics are compared byte for byte, although the collation pads.
func TestTopicsAreExact(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var all []outbox.Message
	for _, topic := range []string{"a", "a ", "A"} {
		all = append(all, messages(topic, 1, t0)...) // one key: claimed Unordered
	}
	if err := b.enqueue(ctx, all, true); err != nil {
		t.Fatal(err)
	}
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour), Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	var dead []stores.Failure
	for _, r := range c.Records() {
		dead = append(dead, stores.Failure{ID: r.ID, Err: "x"})
	}
	if err := c.Complete(ctx, stores.Outcome{Dead: dead}); err != nil {
		t.Fatal(err)
	}
	st := stats(t, b)
	if len(st) != 3 || st["a"].Dead != 1 || st["a "].Dead != 1 || st["A"].Dead != 1 {
		t.Fatalf("stats: %+v, want three topics with one dead each", st)
	}
	d, err := b.store.Dead(ctx, stores.DeadParams{Topic: "a"})
	if err != nil || len(d) != 1 || d[0].Topic != "a" {
		t.Fatalf("dead of topic a: %+v (err %v)", d, err)
	}
	n, err := b.store.Replay(ctx, stores.ReplayParams{Topic: "a ", Now: t0})
	if err != nil || n != 1 {
		t.Fatalf("replay of topic %q: %d (err %v), want 1", "a ", n, err)
	}
}

// One Enqueue larger than the server's max_allowed_packet goes in several
// statements, still in the caller's transaction.
func TestEnqueueLargerThanAPacket(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var maxPacket int
	if err := b.db.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&maxPacket); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	payload := bytes.Repeat([]byte{0, 'x', 0xff}, (outbox.DefaultMaxPayload-1)/3)
	n := maxPacket/len(payload) + 2
	m := messages("big", n, t0)
	for i := range m {
		m[i].Payload = payload
	}
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatalf("enqueue %d × %d bytes (max_allowed_packet %d): %v", n, len(payload), maxPacket, err)
	}
	got := 0
	for {
		c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 4, Now: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Records()) == 0 {
			break
		}
		for _, r := range c.Records() {
			if !bytes.Equal(r.Payload, payload) {
				t.Fatalf("payload of %s changed", r.ID)
			}
		}
		got += len(c.Records())
		if err := c.Complete(ctx, stores.Outcome{Published: recIDs(c.Records()), DeletePublished: true}); err != nil {
			t.Fatal(err)
		}
	}
	if got != n {
		t.Fatalf("claimed %d, want %d", got, n)
	}
}

// A held claim must not hold up Purge or Replay either. InnoDB locks the
// record that ends a locking range scan, even under READ COMMITTED; were
// published or dead rows next to the due pending rows in the claim index,
// a claim that drains the queue would lock one of them until it ends.
func TestClaimDoesNotBlockPurgeOrReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m := messages("orders", 4, t0)
	if err := b.enqueue(ctx, m, true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 2, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, stores.Outcome{Now: now, Published: []uuid.UUID{m[0].ID},
		Dead: []stores.Failure{{ID: m[1].ID, Err: "no"}}}); err != nil {
		t.Fatal(err)
	}
	held, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now}) // the two left, and past them
	if err != nil {
		t.Fatal(err)
	}
	defer held.Abort(ctx) //nolint:errcheck
	if len(held.Records()) != 2 {
		t.Fatalf("claimed %d, want 2", len(held.Records()))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := b.store.Purge(wctx, stores.PurgeParams{Before: now.Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("purge while a claim is held: %d (err %v), want 1", n, err)
	}
	if n, err := b.store.Replay(wctx, stores.ReplayParams{Now: now}); err != nil || n != 1 {
		t.Fatalf("replay while a claim is held: %d (err %v), want 1", n, err)
	}
}

// Runs keep every key's order and stay within their key, whatever the key
// holds: quotes, escapes, non-ASCII, and keys the PAD SPACE collation
// compares equal ("a", "a ", "a  "), whose rows interleave along the index
// that lists a run.
func TestRunsOfHostileKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	keys := append([]string{"a", "a  ", `it's`, `back\slash`, "'; DROP TABLE x; --"}, hostile.Strings...) // and "a "
	const per = 4
	pos := map[uuid.UUID]int{}
	var all []outbox.Message
	for i := range per {
		for _, k := range keys { // interleaved: each key's rows are apart
			m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: k, CreatedAt: t0.Add(time.Duration(len(all)) * time.Microsecond)}
			pos[m.ID] = i
			all = append(all, m)
		}
	}
	if err := b.enqueue(ctx, all, true); err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	longest := 0
	for claimed := 0; claimed < len(all); {
		c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 16, Now: t0.Add(time.Hour), PerKey: per})
		if err != nil {
			t.Fatal(err)
		}
		recs := c.Records()
		if len(recs) == 0 {
			t.Fatalf("claimed %d of %d, then nothing", claimed, len(all))
		}
		defer c.Abort(ctx) //nolint:errcheck // no-op after Complete
		inBatch := map[string]int{}
		for _, r := range recs {
			if p := pos[r.ID]; p != next[r.Key] {
				t.Fatalf("key %q: claimed its record %d, want %d", r.Key, p, next[r.Key])
			}
			next[r.Key]++
			inBatch[r.Key]++
			longest = max(longest, inBatch[r.Key])
		}
		if err := c.Complete(ctx, stores.Outcome{Now: t0, Published: recIDs(recs), DeletePublished: true}); err != nil {
			t.Fatal(err)
		}
		claimed += len(recs)
	}
	if longest < 2 {
		t.Fatal("no batch took more than one record of a key")
	}
}

// A run stops before a record another transaction holds (an operator's
// DeadLetter, a relay in unordered mode), and goes on once it is free.
func TestRunStopsAtALockedRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := messages("orders", 4, t0)
	for i := range msgs {
		msgs[i].Key = "k"
	}
	if err := b.enqueue(ctx, msgs, true); err != nil {
		t.Fatal(err)
	}
	other, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback() //nolint:errcheck // ends the test's lock
	var seq uint64
	if err := other.QueryRowContext(ctx, "SELECT seq FROM outbox_messages WHERE id = ? FOR UPDATE", msgs[2].ID[:]).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now, PerKey: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(c.Records()); !slices.Equal(got, []uuid.UUID{msgs[0].ID, msgs[1].ID}) {
		t.Fatalf("with the third record held elsewhere: claimed %v, want the first two", got)
	}
	if err := c.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	c, err = b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now, PerKey: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort(ctx) //nolint:errcheck // a read-only claim
	want := []uuid.UUID{msgs[0].ID, msgs[1].ID, msgs[2].ID, msgs[3].ID}
	if got := recIDs(c.Records()); !slices.Equal(got, want) {
		t.Fatalf("once free: claimed %v, want all four in order %v", got, want)
	}
}
