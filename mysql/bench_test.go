package mysql_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// BenchmarkClaimComplete measures the relay's store side: claim 1000,
// complete them all, per batch; rows/s is the figure to compare.
func BenchmarkClaimComplete(b *testing.B) {
	for _, c := range []struct {
		name  string
		apply func(ids []stores.Record, now time.Time) stores.Outcome
	}{
		{"mark", func(r []stores.Record, now time.Time) stores.Outcome {
			return stores.Outcome{Now: now, Published: recIDs(r)}
		}},
		{"delete", func(r []stores.Record, now time.Time) stores.Outcome {
			return stores.Outcome{Now: now, Published: recIDs(r), DeletePublished: true}
		}},
		{"retry", func(r []stores.Record, now time.Time) stores.Outcome {
			o := stores.Outcome{Now: now}
			for _, rec := range r {
				o.Retry = append(o.Retry, stores.Failure{ID: rec.ID, Err: "broker said no", NextAttempt: now.Add(time.Hour)})
			}
			return o
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			const batch = 1000
			bd := setupB(b)
			ctx := context.Background()
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			for i := 0; i < b.N; i += 10 {
				if err := bd.enqueue(ctx, messages("bench", 10*batch, t0), true); err != nil {
					b.Fatal(err)
				}
			}
			now := t0.Add(time.Minute)
			var claiming time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				cl, err := bd.store.Claim(ctx, stores.ClaimParams{Limit: batch, Now: now})
				if err != nil {
					b.Fatal(err)
				}
				claiming += time.Since(start)
				if err := cl.Complete(ctx, c.apply(cl.Records(), now)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(claiming.Milliseconds())/float64(b.N), "claim-ms/op")
		})
	}
}

// BenchmarkEnqueue measures the write side: one transaction per message.
func BenchmarkEnqueue(b *testing.B) {
	bd := setupB(b)
	ctx := context.Background()
	m := messages("bench", 1, time.Now())
	b.ResetTimer()
	for range b.N {
		m[0].ID = [16]byte{}
		if err := bd.enqueue(ctx, m, true); err != nil {
			b.Fatal(err)
		}
	}
}
