package mysql_test

import (
	"context"
	"fmt"
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

// BenchmarkDrainBacklog drains a backlog of 20,000 events (1, 10 or 1,000
// keys, interleaved) with claims of 1,000 that delete what they took:
// unordered, ordered heads only (PerKey 1), and ordered with runs of up to
// 1,000 of a key. events/s is the figure to compare.
//
//	go test -run '^$' -bench DrainBacklog -benchtime 3x ./mysql/
func BenchmarkDrainBacklog(b *testing.B) {
	const backlog, batch = 20000, 1000
	for _, keys := range []int{1, 10, 1000} {
		for _, m := range []struct {
			name      string
			unordered bool
			perKey    int
		}{{"unordered", true, 0}, {"ordered", false, 1}, {"ordered-runs", false, batch}} {
			if keys == 1 && m.perKey == 1 {
				continue // one event per claim: 20,000 claims, minutes, and nothing to learn
			}
			b.Run(fmt.Sprintf("keys=%d/%s", keys, m.name), func(b *testing.B) {
				bd := setupB(b)
				ctx := context.Background()
				t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
				now := t0.Add(time.Minute)
				var claims int
				for range b.N {
					b.StopTimer()
					for i := 0; i < backlog; i += 2000 {
						msgs := messages("bench", 2000, t0)
						for j := range msgs {
							msgs[j].Key = fmt.Sprint((i + j) % keys)
						}
						if err := bd.enqueue(ctx, msgs, true); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
					for drained := 0; drained < backlog; {
						cl, err := bd.store.Claim(ctx, stores.ClaimParams{Limit: batch, Now: now, Unordered: m.unordered, PerKey: m.perKey})
						if err != nil {
							b.Fatal(err)
						}
						recs := cl.Records()
						if len(recs) == 0 {
							b.Fatalf("drained %d of %d, then claimed nothing", drained, backlog)
						}
						if err := cl.Complete(ctx, stores.Outcome{Now: now, Published: recIDs(recs), DeletePublished: true}); err != nil {
							b.Fatal(err)
						}
						drained += len(recs)
						claims++
					}
				}
				b.ReportMetric(float64(b.N*backlog)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(claims)/float64(b.N), "claims/op")
			})
		}
	}
}
