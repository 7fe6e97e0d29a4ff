package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/mysql"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrainToNATS drains a backlog of b.N events (200-byte payloads,
// 1,000 keys) from MariaDB to JetStream through the relay, ordered and
// unordered.
//
//	go test -run '^$' -bench DrainToNATS -benchtime 50000x ./mysql/
func BenchmarkDrainToNATS(b *testing.B) {
	for _, mode := range []string{"unordered", "ordered"} {
		b.Run(mode, func(b *testing.B) {
			db := mysqltest.Open(b)
			ctx := context.Background()
			d, err := mysql.New(db, nil)
			if err != nil {
				b.Fatal(err)
			}
			s := d.Store()
			if err := s.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			ob := outbox.New(d, nil)
			payload := make([]byte, 200)
			for i := 0; i < b.N; i += 2000 {
				msgs := make([]outbox.Message, 0, 2000)
				for j := i; j < min(b.N, i+2000); j++ {
					msgs = append(msgs, outbox.Message{Topic: "bench", Key: fmt.Sprint(j % 1000), Payload: payload})
				}
				if err := inTx(ctx, db, func(tx *sql.Tx) error { return ob.Enqueue(ctx, tx, msgs...) }); err != nil {
					b.Fatal(err)
				}
			}
			nc := natstest.Connect(b)
			prefix, _ := natstest.NewStream(b, nc)
			pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			r, err := relay.New(s, pub, &relay.Config{Unordered: mode == "unordered", PollInterval: 10 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Minute)
			for r.Stats().Published < int64(b.N) {
				if time.Now().After(deadline) {
					b.Fatalf("drained %d of %d", r.Stats().Published, b.N)
				}
				time.Sleep(time.Millisecond) // polling a counter
			}
			elapsed := time.Since(start)
			b.StopTimer()
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := r.Stop(sctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkWritePath measures what the outbox costs MariaDB writers:
// commits/s of a business UPDATE alone and with one enqueued keyed event,
// with 1 and 16 writers.
//
//	go test -run '^$' -bench WritePath -benchtime 4s ./mysql/
func BenchmarkWritePath(b *testing.B) {
	db := mysqltest.Open(b)
	ctx := context.Background()
	const accounts = 10000
	if _, err := db.ExecContext(ctx, `CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO accounts SELECT seq, 0 FROM seq_1_to_10000`); err != nil {
		b.Fatal(err)
	}
	d, err := mysql.New(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Store().Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ob := outbox.New(d, nil)
	payload := make([]byte, 200)
	for _, mode := range []string{"update-only", "update+enqueue"} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/writers=%d", mode, writers), func(b *testing.B) {
				db.SetMaxOpenConns(writers + 4)
				tx := func() error {
					return inTx(ctx, db, func(tx *sql.Tx) error {
						id := rand.IntN(accounts) + 1
						if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 1 WHERE id = ?`, id); err != nil {
							return err
						}
						if mode == "update-only" {
							return nil
						}
						return ob.Enqueue(ctx, tx, outbox.Message{Topic: "accounts", Key: fmt.Sprint(id), Payload: payload})
					})
				}
				if writers == 1 {
					for b.Loop() {
						if err := tx(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism((writers + 1) / 2)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
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

func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
