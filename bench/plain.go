package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/relay"
)

// plainBatched is baseline (d): the plain batched relay, the least any
// relay must do, written by hand on our table. Each of two workers (our
// default) claims 1,000 due unkeyed rows with FOR UPDATE SKIP LOCKED along
// the index of pending unkeyed rows, publishes all of them async to
// JetStream with the event ID as Nats-Msg-Id and the key as a header, waits
// for every ack, deletes them in one statement and commits. No per-key
// order, no retries, no classification of failures. On MySQL each batch
// is plainBatchMySQL.
func (r *runner) plainBatched(ctx context.Context) error {
	n := r.o.DrainN
	e, err := r.newEnv(ctx, "obb_plain", nil, 0)
	if err != nil {
		return err
	}
	defer e.close()
	// Unkeyed, so that its claim (by due time) runs along the store's index
	// of pending unkeyed rows; the plain relay ignores keys anyway.
	if err := e.seed(ctx, n, payloadSize, 0); err != nil {
		return err
	}
	batch := plainBatch
	if e.my != nil {
		batch = plainBatchMySQL
	}
	var done atomic.Int64
	rss := startRSS()
	cpu := e.startCPU()
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, relay.DefaultWorkers)
	for range relay.DefaultWorkers {
		wg.Go(func() {
			for done.Load() < int64(n) {
				got, err := batch(ctx, e)
				if err != nil {
					errc <- err
					return
				}
				if got == 0 {
					if time.Since(start) > drainLimit {
						errc <- fmt.Errorf("claimed nothing with %d of %d done", done.Load(), n)
						return
					}
					time.Sleep(time.Millisecond) // the other worker holds the rest
				}
				done.Add(int64(got))
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	el := time.Since(start)
	peak := rss.peakMiB()
	metrics := cpu.perEvent(n)
	if err := e.waitStream(ctx, n, time.Minute, nil); err != nil {
		return err
	}
	r.add(Result{Workload: "drain", Case: "baseline: plain batched relay", Params: map[string]any{"n": n, "keys": 0, "batch": 1000, "workers": relay.DefaultWorkers},
		Metrics: merge(metrics, map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": peak})})
	return nil
}

// plainBatch is one claim → publish → delete → commit of plainBatched.
func plainBatch(ctx context.Context, e *env) (int, error) {
	got := 0
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, topic, key, payload FROM `+e.table()+`
			WHERE status = 0 AND key = '' AND available_at <= now() ORDER BY available_at, seq LIMIT 1000 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		var ids []uuid.UUID
		var futs []jetstream.PubAckFuture
		for rows.Next() {
			var (
				id         uuid.UUID
				topic, key string
				payload    []byte
			)
			if err := rows.Scan(&id, &topic, &key, &payload); err != nil {
				return err
			}
			f, err := e.js.PublishMsgAsync(&nats.Msg{Subject: e.name + "." + topic, Data: payload, Header: nats.Header{
				jetstream.MsgIDHeader: []string{id.String()}, "Outbox-Key": []string{key},
			}})
			if err != nil {
				return err
			}
			ids, futs = append(ids, id), append(futs, f)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := awaitAcks(futs); err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM `+e.table()+` WHERE id = ANY($1)`, ids); err != nil {
				return err
			}
		}
		got = len(ids)
		return nil
	})
	return got, err
}
