package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/cputime"
	"github.com/outboxgo/outbox/stores"
)

// BenchmarkBacklogClaim drains a backlog of b.N keyed events (200-byte
// payloads) over 1, 10, 1,000 and 100,000 keys (their rows interleaved,
// as 'k' || (g % keys) makes them) with the relay's claim for a
// publisher that keeps key order (a batch of 1,000, runs of up to 1,000,
// pipelined), each batch completed at once (deleted): unordered, ordered
// with runs locked in order (the default), and ordered with every run
// ranked (what a claim falls back to; see runLocking); and, over 1,000
// keys, unordered events that carry a traceparent and a tracestate header
// (as the otel package's Inject writes them). It reports the
// claim's and the completion's time per batch and the CPU per event of
// PostgreSQL (every postgres process of the machine: run it on an
// otherwise idle server) and of this process. Nothing publishes, so the
// numbers are the store's alone.
//
//	go test -run '^$' -bench BacklogClaim -benchtime 200000x ./postgres/
func BenchmarkBacklogClaim(b *testing.B) {
	for _, keys := range []int{1, 10, 1000, 100000} {
		modes := []string{"unordered", "ordered", "ordered-ranked"}
		if keys == 1000 {
			modes = append(modes, "unordered-traced")
		}
		for _, mode := range modes {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, mode), func(b *testing.B) {
				benchBacklogClaim(b, keys, mode)
			})
		}
	}
}

// traceHeaders are a traced event's headers.
const traceHeaders = `{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}`

func benchBacklogClaim(b *testing.B, keys int, mode string) {
	ctx := context.Background()
	pool, db := migrated(b)
	s := db.Store()
	var headers *string // SQL NULL
	if mode == "unordered-traced" {
		h := traceHeaders
		headers = &h
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s.nm.table+` (id, topic, key, type, payload, headers, created_at, available_at)
		SELECT gen_random_uuid(), 'orders', 'k' || (g % $1), 'T', convert_to(repeat('x', 200), 'UTF8'), $3::jsonb, now(), now()
		FROM generate_series(1, $2) g`, keys, b.N, headers); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+s.nm.table); err != nil {
		b.Fatal(err)
	}
	p := stores.ClaimParams{Limit: 1000, PerKey: 1000, Pipelined: true, Unordered: mode == "unordered" || mode == "unordered-traced"}
	locking := lockInOrder
	if mode == "ordered-ranked" {
		locking = lockRanked
	}
	var claimed, completed time.Duration
	pg, self := cputime.Proc("postgres"), cputime.Self()
	got, batches := 0, 0
	b.ResetTimer()
	for got < b.N {
		p.Now = time.Now()
		start := time.Now()
		batch, err := s.claimIn(ctx, p, locking)
		if err != nil {
			b.Fatal(err)
		}
		claimed += time.Since(start)
		recs := batch.Records()
		if len(recs) == 0 {
			b.Fatalf("claimed nothing after %d of %d events", got, b.N)
		}
		ids := make([]uuid.UUID, len(recs))
		for i := range recs {
			ids[i] = recs[i].ID
		}
		start = time.Now()
		if err := batch.Complete(ctx, stores.Outcome{Now: time.Now(), Published: ids, DeletePublished: true}); err != nil {
			b.Fatal(err)
		}
		completed += time.Since(start)
		got += len(recs)
		batches++
	}
	b.StopTimer()
	b.ReportMetric(float64(claimed.Microseconds())/1000/float64(batches), "claim-ms/batch")
	b.ReportMetric(float64(completed.Microseconds())/1000/float64(batches), "complete-ms/batch")
	b.ReportMetric(float64(got)/float64(batches), "events/batch")
	b.ReportMetric(float64((cputime.Proc("postgres")-pg).Microseconds())/float64(got), "pg-cpu-µs/event")
	b.ReportMetric(float64((cputime.Self()-self).Microseconds())/float64(got), "self-cpu-µs/event")
}
