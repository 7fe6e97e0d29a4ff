package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// BenchmarkWritePath measures what the outbox costs the writer: commits/s of
// a business UPDATE alone, and with one enqueued event (with and without the
// NOTIFY that wakes relays), with 1 and 16 concurrent writers.
//
//	go test -run '^$' -bench WritePath -benchtime 5s ./postgres/
func BenchmarkWritePath(b *testing.B) {
	pool := pgtest.Pool(b)
	schema := pgtest.Schema(b, pool)
	ctx := context.Background()
	const accounts = 10000
	if _, err := pool.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA "%[1]s";
		CREATE TABLE "%[1]s".accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO "%[1]s".accounts SELECT g, 0 FROM generate_series(1, %[2]d) g`, schema, accounts)); err != nil {
		b.Fatal(err)
	}
	update := `UPDATE "` + schema + `".accounts SET balance = balance + 1 WHERE id = $1`
	payload := make([]byte, 200)

	modes := map[string]*postgres.Config{
		"update-only":                    nil,
		"update+enqueue":                 {Table: "m_default"},
		"update+enqueue-notify-every-tx": {Table: "m_every", NotifyEveryTx: true},
		"update+enqueue-no-notify":       {Table: "m_none", DisableNotify: true},
	}
	for _, mode := range []string{"update-only", "update+enqueue", "update+enqueue-notify-every-tx", "update+enqueue-no-notify"} {
		var ob *outbox.Outbox[pgx.Tx]
		if cfg := modes[mode]; cfg != nil {
			cfg.Schema = schema
			db, err := postgres.New(pool, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := db.Store().Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			ob = outbox.New(db, nil)
		}
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				var next atomic.Int64
				tx := func() error {
					return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						id := rand.IntN(accounts) + 1
						if _, err := tx.Exec(ctx, update, id); err != nil {
							return err
						}
						if ob == nil {
							return nil
						}
						return ob.Enqueue(ctx, tx, outbox.Message{Topic: "accounts", Key: fmt.Sprint(id),
							Type: "BalanceChanged", Payload: payload})
					})
				}
				b.ResetTimer()
				if writers == 1 {
					for b.Loop() {
						if err := tx(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism((writers + 1) / 2) // × GOMAXPROCS (2 here)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							next.Add(1)
							if err := tx(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}

// BenchmarkTrickleClaim measures what a relay woken for one event pays the
// database: each op commits one keyed event (one of 1,000 keys), then
// claims it the way the relay's ordered claim does (a batch of 1,000, runs
// of up to 1,000) and completes it (deleted). It reports the claim's
// and the completion's time per op (the enqueue is not timed) and
// PostgreSQL's CPU per op, enqueue included (every postgres process of
// the machine: run it on an otherwise idle server).
//
//	go test -run '^$' -bench TrickleClaim -benchtime 2000x ./postgres/
func BenchmarkTrickleClaim(b *testing.B) {
	pool := pgtest.Pool(b)
	ctx := context.Background()
	db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(b, pool), DisableNotify: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ob := outbox.New(db, nil)
	s := db.Store()
	payload := make([]byte, 200)
	var claimed time.Duration
	pg := cputime.Proc("postgres")
	n := 0
	for b.Loop() {
		n++
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Key: fmt.Sprint(n % 1000), Type: "T", Payload: payload})
		}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		batch, err := s.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now(), PerKey: 1000})
		if err != nil {
			b.Fatal(err)
		}
		recs := batch.Records()
		if len(recs) != 1 {
			b.Fatalf("claimed %d events, want 1", len(recs))
		}
		if err := batch.Complete(ctx, stores.Outcome{Now: time.Now(), Published: []uuid.UUID{recs[0].ID}, DeletePublished: true}); err != nil {
			b.Fatal(err)
		}
		claimed += time.Since(start)
	}
	b.ReportMetric(float64(claimed.Microseconds())/float64(n), "claim+complete-µs/op")
	b.ReportMetric(float64((cputime.Proc("postgres")-pg).Microseconds())/float64(n), "pg-cpu-µs/op")
}
