package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// Batches continued one after another (each claimed while the one before
// is held, resumed once it completed) take every key's records in the
// key's order, none twice and none left behind, whatever the keys: keys
// equal but for trailing spaces (one group to the claim's key walk),
// quotes, backslashes and the hostile strings.
func TestContinuationsOfHostileKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	keys := append([]string{"a", "a  ", `it's`, `back\slash`, "'; DROP TABLE x; --"}, hostile.Strings...) // and "a "
	const per = 9
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
	// Room for every key's head and a run of 1 after it (runs are listed
	// for as many keys as the room gives minRun, 4, each); continuations
	// take 2 of each key.
	p := stores.ClaimParams{Limit: 5 * len(keys), Now: t0.Add(time.Hour), PerKey: 2}
	next := map[string]int{}
	continued := 0
	var cur stores.Batch
	for claimed := 0; claimed < len(all); {
		if cur == nil {
			c, err := b.store.Claim(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Records()) == 0 {
				t.Fatalf("claimed %d of %d, then nothing", claimed, len(all))
			}
			cur = c
		}
		recs := cur.Records()
		for _, r := range recs {
			if p := pos[r.ID]; p != next[r.Key] {
				t.Fatalf("key %q: claimed its record %d, want %d", r.Key, p, next[r.Key])
			}
			next[r.Key]++
		}
		c, err := cur.(stores.Continuer).Continue(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if c != nil {
			continued++
			defer c.Abort(ctx) //nolint:errcheck // no-op after Complete
		}
		if err := cur.Complete(ctx, stores.Outcome{Now: t0, Published: recIDs(recs), DeletePublished: true}); err != nil {
			t.Fatal(err)
		}
		claimed += len(recs)
		cur = c
		if c != nil {
			if err := c.(stores.Resumer).Resume(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cur != nil {
		t.Fatalf("a continuation after the last record: %v", recIDs(cur.Records()))
	}
	if continued == 0 {
		t.Fatal("no batch was continued")
	}
}

// The relay claims a continuation while the batch before it is published
// and completed, so Continue may run after the batch completed and a
// fresh claim took the key's next records: the continuation then takes
// none of them, and none after them.
func TestContinueAfterTheBatchCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msgs := messages("orders", 16, t0)
	for i := range msgs {
		msgs[i].Key = "k"
	}
	if err := b.enqueue(ctx, msgs, true); err != nil {
		t.Fatal(err)
	}
	p := stores.ClaimParams{Limit: 40, Now: t0.Add(time.Hour), PerKey: 4}
	b1, err := b.store.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got := recIDs(b1.Records()); !slices.Equal(got, recIDs(records(msgs[:4]))) {
		t.Fatalf("claim: %v, want k's first 4", got)
	}
	if err := b1.Complete(ctx, stores.Outcome{Now: p.Now, Published: recIDs(b1.Records()), DeletePublished: true}); err != nil {
		t.Fatal(err)
	}
	b3, err := b.store.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b3.Abort(ctx) //nolint:errcheck // the test's end
	if got := recIDs(b3.Records()); !slices.Equal(got, recIDs(records(msgs[4:8]))) {
		t.Fatalf("fresh claim: %v, want k's records 5 to 8", got)
	}
	// PerKey 12: a continuation that skipped the records b3 holds could
	// reach records 9 to 16.
	c, err := b1.(stores.Continuer).Continue(ctx, stores.ClaimParams{Limit: 40, Now: p.Now, PerKey: 12})
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		defer c.Abort(ctx) //nolint:errcheck // the test's end
		t.Fatalf("continuation of a completed batch whose key another claim holds: %v, want none", recIDs(c.Records()))
	}
}

func records(msgs []outbox.Message) []stores.Record {
	out := make([]stores.Record, len(msgs))
	for i, m := range msgs {
		out[i].Message = m
	}
	return out
}

// orderLog is a publisher that records what it acknowledges, by key, and
// fails each event of fail once.
type orderLog struct {
	mu    sync.Mutex
	fail  map[uuid.UUID]bool
	byKey map[string][]uuid.UUID
	n     atomic.Int64
}

func (l *orderLog) Publish(_ context.Context, msgs []outbox.Message) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if l.fail[m.ID] {
			delete(l.fail, m.ID)
			errs[i] = errors.New("broker hiccup")
			continue
		}
		l.byKey[m.Key] = append(l.byKey[m.Key], m.ID)
		l.n.Add(1)
	}
	return errs
}

func (l *orderLog) Close() error { return nil }

// claimCount counts a store's fresh claims that took records.
type claimCount struct {
	stores.Store
	n atomic.Int64
}

func (c *claimCount) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	b, err := c.Store.Claim(ctx, p)
	if err == nil && len(b.Records()) > 0 {
		c.n.Add(1)
	}
	return b, err
}

// The relay over MySQL with continuations: two relays of two workers
// drain a few busy keys in order, each event acknowledged once, although
// some events fail once in a batch whose continuation is already
// claimed (the continuation then sends nothing of their keys).
func TestRelayContinuesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const keys, per = 4, 300
	want := map[string][]uuid.UUID{}
	var all []outbox.Message
	for i := range per {
		for k := range keys {
			m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprint("k", k), Payload: []byte(fmt.Sprint(i))}
			want[m.Key] = append(want[m.Key], m.ID)
			all = append(all, m)
		}
	}
	if err := b.enqueue(ctx, all, true); err != nil {
		t.Fatal(err)
	}
	log := &orderLog{byKey: map[string][]uuid.UUID{}, fail: map[uuid.UUID]bool{}}
	for _, i := range []int{7, 60, 61, 250} {
		log.fail[want["k1"][i]] = true
	}
	log.fail[want["k2"][100]] = true
	var batches atomic.Int64
	var rs []*relay.Relay
	var counts []*claimCount
	for range 2 {
		s := &claimCount{Store: b.store}
		r, err := relay.New(s, log, &relay.Config{BatchSize: 40, PollInterval: 10 * time.Millisecond,
			RetryBackoff: outbox.Backoff{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond},
			Hooks:        relay.Hooks{AfterComplete: func(relay.BatchResult) { batches.Add(1) }}})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		rs, counts = append(rs, r), append(counts, s)
	}
	for log.n.Load() < int64(len(all)) {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d acknowledged", log.n.Load(), len(all))
		}
		time.Sleep(5 * time.Millisecond) // polling a counter
	}
	for _, r := range rs {
		if err := r.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for k, ids := range want {
		if !slices.Equal(log.byKey[k], ids) {
			t.Fatalf("key %s: acknowledged %d events, not in the order they were enqueued (or not once each)", k, len(log.byKey[k]))
		}
	}
	claims := counts[0].n.Load() + counts[1].n.Load()
	if batches.Load() <= claims {
		t.Fatalf("%d batches from %d fresh claims: no continuation", batches.Load(), claims)
	}
}
