package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// handListen is the latency workload's reference: the LISTEN/NOTIFY relay
// a team writes by hand, on a plain table of its own. Each writer's
// transaction inserts its event and sends a NOTIFY in one statement; one
// relay goroutine LISTENs and, at every notification (or after a second
// without one), claims up to 1,000 rows in seq order with FOR UPDATE SKIP
// LOCKED, publishes them async to JetStream, waits for the acks, deletes
// them and commits, until a claim finds none. No per-key order beyond a
// single relay's, no retries, no debounce.
type handListen struct {
	e       *env
	table   string
	channel string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	err     error // the relay goroutine's, read after wg.Wait
	stages  *stages

	claims, batches atomic.Int64 // claims made, and those that found rows
}

// startHandListen creates the reference's table and starts its relay; it
// returns once the relay is listening.
func startHandListen(ctx context.Context, e *env, st *stages) (*handListen, error) {
	h := &handListen{e: e, table: `"` + e.name + `".hand`, channel: e.name + "_hand", stages: st}
	if _, err := e.pool.Exec(ctx, `CREATE TABLE `+h.table+` (seq bigserial PRIMARY KEY, id uuid NOT NULL,
		key text NOT NULL, payload bytea NOT NULL, sched text NOT NULL)`); err != nil {
		return nil, err
	}
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, `LISTEN "`+h.channel+`"`); err != nil {
		conn.Release()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	h.cancel = cancel
	h.wg.Go(func() {
		defer conn.Release()
		for rctx.Err() == nil {
			for {
				n, err := h.batch(rctx)
				if err != nil {
					if rctx.Err() == nil {
						h.err = err
					}
					return
				}
				if n == 0 {
					break
				}
			}
			wctx, wcancel := context.WithTimeout(rctx, time.Second)
			_, err := conn.Conn().WaitForNotification(wctx)
			wcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && rctx.Err() == nil {
				h.err = err
				return
			}
		}
	})
	return h, nil
}

// write enqueues one event in tx, as the reference's writers do.
func (h *handListen) write(ctx context.Context, tx pgx.Tx, key string, payload []byte, sched string) error {
	_, err := tx.Exec(ctx, `WITH ins AS (INSERT INTO `+h.table+` (id, key, payload, sched) VALUES ($1, $2, $3, $4))
		SELECT pg_notify('`+h.channel+`', '')`, uuid.New(), key, payload, sched)
	return err
}

// stop ends the relay and returns its error, if it failed.
func (h *handListen) stop() error {
	h.cancel()
	h.wg.Wait()
	return h.err
}

// batch is one claim → publish → delete → commit.
func (h *handListen) batch(ctx context.Context) (int, error) {
	got := 0
	err := pgx.BeginFunc(ctx, h.e.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT seq, id, key, payload, sched FROM `+h.table+` ORDER BY seq LIMIT 1000 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		var seqs []int64
		var scheds []string
		var futs []jetstream.PubAckFuture
		for rows.Next() {
			var (
				seq        int64
				id         uuid.UUID
				key, sched string
				payload    []byte
			)
			if err := rows.Scan(&seq, &id, &key, &payload, &sched); err != nil {
				return err
			}
			h.stages.send(sched, time.Now())
			f, err := h.e.js.PublishMsgAsync(&nats.Msg{Subject: h.e.name + ".hand", Data: payload, Header: nats.Header{
				jetstream.MsgIDHeader: []string{id.String()}, "Outbox-Key": []string{key}, schedHeader: []string{sched},
			}})
			if err != nil {
				return err
			}
			seqs, scheds, futs = append(seqs, seq), append(scheds, sched), append(futs, f)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if err := awaitAcks(futs); err != nil {
			return err
		}
		acked := time.Now()
		for _, sched := range scheds {
			h.stages.ack(sched, acked)
		}
		if len(seqs) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM `+h.table+` WHERE seq = ANY($1)`, seqs); err != nil {
				return err
			}
		}
		got = len(seqs)
		h.claims.Add(1)
		if got > 0 {
			h.batches.Add(1)
		}
		return nil
	})
	return got, err
}
