package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

func benchSetup(b *testing.B) (*sqlite.Store, func(msgs []outbox.Message)) {
	b.Helper()
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	d, err := sqlite.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	s := d.Store()
	ob := outbox.New(d, nil)
	return s, func(msgs []outbox.Message) {
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := ob.Enqueue(ctx, tx, msgs...); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMsgs(n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{Topic: "orders", Key: "k", Payload: []byte(`{"n":1}`),
			Headers: map[string]string{"traceparent": "00-abc-def-01"}}
	}
	return out
}

// BenchmarkEnqueueOne is one transaction with one event (synchronous=FULL).
func BenchmarkEnqueueOne(b *testing.B) {
	_, enqueue := benchSetup(b)
	m := benchMsgs(1)
	for b.Loop() {
		enqueue(m)
	}
}

// BenchmarkClaimComplete1000 claims 1,000 events and deletes them; it
// reports events per second.
func BenchmarkClaimComplete1000(b *testing.B) {
	s, enqueue := benchSetup(b)
	ctx := context.Background()
	m := benchMsgs(1000)
	now := time.Now().Add(time.Hour)
	var n int
	for b.Loop() {
		b.StopTimer()
		enqueue(m)
		b.StartTimer()
		bt, err := s.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uuid.UUID, len(bt.Records()))
		for i, r := range bt.Records() {
			ids[i] = r.ID
		}
		if err := bt.Complete(ctx, stores.Outcome{Now: now, Published: ids, DeletePublished: true}); err != nil {
			b.Fatal(err)
		}
		n += len(ids)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkClaimOrdered claims ordered batches of up to 1,000 events from a
// backlog of 20,000 spread over keys keys, heads only (perKey=1) or with
// runs of up to 1,000 events of a key, and aborts them, so every claim
// sees the same backlog. It reports the events a claim took and events per
// second of claiming.
func BenchmarkClaimOrdered(b *testing.B) {
	const backlog, limit = 20000, 1000
	for _, keys := range []int{1, 10, 100, 1000} {
		for _, perKey := range []int{1, 1000} {
			b.Run(fmt.Sprintf("keys=%d/perKey=%d", keys, perKey), func(b *testing.B) {
				s, enqueue := benchSetup(b)
				m := benchMsgs(backlog)
				for i := range m {
					m[i].Key = fmt.Sprintf("k%04d", i%keys)
				}
				enqueue(m)
				ctx := context.Background()
				now := time.Now().Add(time.Hour)
				var n int
				for b.Loop() {
					bt, err := s.Claim(ctx, stores.ClaimParams{Limit: limit, Now: now, PerKey: perKey})
					if err != nil {
						b.Fatal(err)
					}
					n += len(bt.Records())
					b.StopTimer()
					if err := bt.Abort(ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(n)/float64(b.N), "events/claim")
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	}
}
