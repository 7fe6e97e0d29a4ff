package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

const (
	payloadSize = 200
	keyCount    = 1000
	drainLimit  = 60 * time.Minute
	// syncN bounds the events of the one-at-a-time JetStream limit.
	syncN = 50_000
)

// limits measures (c): JetStream's async publish rate with no database, and
// the database's claim + mark rate with no broker.
func (r *runner) limits(ctx context.Context) error {
	n := r.o.DrainN
	e, err := r.newEnv(ctx, "obb_limits", nil, 0)
	if err != nil {
		return err
	}
	defer e.close()

	// JetStream alone: batches of 1,000 async publishes, each batch's acks
	// awaited before the next, 200-byte payloads and a Nats-Msg-Id.
	payload := make([]byte, payloadSize)
	rss := startRSS()
	start := time.Now()
	const batch = 1000
	for lo := 0; lo < n; lo += batch {
		futs := make([]jetstream.PubAckFuture, 0, batch)
		for i := lo; i < min(n, lo+batch); i++ {
			m := &nats.Msg{Subject: e.name + ".bench", Data: payload, Header: nats.Header{
				jetstream.MsgIDHeader: []string{uuid.NewString()},
			}}
			f, err := e.js.PublishMsgAsync(m)
			if err != nil {
				return fmt.Errorf("publish async: %w", err)
			}
			futs = append(futs, f)
		}
		if err := awaitAcks(futs); err != nil {
			return err
		}
	}
	el := time.Since(start)
	r.add(Result{Workload: "drain", Case: "limit: JetStream async publish", Params: map[string]any{"n": n, "batch": batch},
		Metrics: map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": rss.peakMiB()}})

	// JetStream one message at a time: each publish waits for its ack, the
	// most one key can move when a key has one message in flight.
	ns := min(n, syncN)
	start = time.Now()
	for range ns {
		m := &nats.Msg{Subject: e.name + ".bench", Data: payload, Header: nats.Header{
			jetstream.MsgIDHeader: []string{uuid.NewString()},
		}}
		if _, err := e.js.PublishMsg(ctx, m); err != nil {
			return fmt.Errorf("publish sync: %w", err)
		}
	}
	el = time.Since(start)
	r.add(Result{Workload: "drain", Case: "limit: JetStream sync publish", Params: map[string]any{"n": ns},
		Metrics: map[string]float64{"events_per_s": float64(ns) / el.Seconds(), "seconds": el.Seconds()}})

	// The database alone: our store's Claim 1,000 + Complete (delete, as the
	// relay does with no retention), two workers like the relay's default.
	// Twice: unordered claims of unkeyed events (the index on due time) and
	// ordered claims of events with 1,000 keys (the per-key index). The
	// higher is the "DB limit" of the ratios.
	db := e.dbName()
	for _, c := range []struct {
		name string
		keys int
	}{{"limit: " + db + " claim+delete, unordered, unkeyed", 0}, {"limit: " + db + " claim+delete, ordered, 1000 keys", keyCount}} {
		if err := e.seed(ctx, n, payloadSize, c.keys); err != nil {
			return err
		}
		el, peak, err := claimLoop(ctx, e, n, c.keys == 0)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		r.add(Result{Workload: "drain", Case: c.name, Params: map[string]any{"n": n, "keys": c.keys, "batch": 1000, "workers": relay.DefaultWorkers},
			Metrics: map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": peak}})
	}
	return nil
}

// claimLoop claims and deletes n events with the relay's default number
// of workers and no broker.
func claimLoop(ctx context.Context, e *env, n int, unordered bool) (time.Duration, float64, error) {
	var done atomic.Int64
	rss := startRSS()
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, relay.DefaultWorkers)
	for range relay.DefaultWorkers {
		wg.Go(func() {
			for done.Load() < int64(n) {
				b, err := e.mainStore().Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now(), Unordered: unordered, PerKey: relay.DefaultPerKey})
				if err != nil {
					errc <- err
					return
				}
				recs := b.Records()
				if len(recs) == 0 {
					_ = b.Abort(ctx)
					if time.Since(start) > drainLimit {
						errc <- fmt.Errorf("claimed nothing with %d of %d done", done.Load(), n)
						return
					}
					time.Sleep(time.Millisecond)
					continue
				}
				ids := make([]uuid.UUID, len(recs))
				for i := range recs {
					ids[i] = recs[i].ID
				}
				if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: ids, DeletePublished: true}); err != nil {
					errc <- err
					return
				}
				done.Add(int64(len(recs)))
			}
		})
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return time.Since(start), rss.peakMiB(), nil
}

// drainOurs drains DrainN events with our relay for each key count of
// Options.Keys, ordered then unordered on a backlog of the same shape, then
// unordered with unkeyed events (the store's index path for unordered
// claims), then the plain batched relay (baseline: the least a relay must
// do).
func (r *runner) drainOurs(ctx context.Context) error {
	for _, keys := range r.o.Keys {
		for _, unordered := range []bool{false, true} {
			mode := "ordered"
			if unordered {
				mode = "unordered"
			}
			res, err := r.drainRelay(ctx, r.o.DrainN, keys, 1, 0, &relay.Config{Unordered: unordered})
			if err != nil {
				return fmt.Errorf("%s, %d keys: %w", mode, keys, err)
			}
			res.Workload, res.Case = "drain", fmt.Sprintf("outbox relay, %s, %d keys", mode, keys)
			r.add(res)
		}
	}
	res, err := r.drainRelay(ctx, r.o.DrainN, 0, 1, 0, &relay.Config{Unordered: true})
	if err != nil {
		return fmt.Errorf("unkeyed: %w", err)
	}
	res.Workload, res.Case = "drain", "outbox relay, unordered, unkeyed events"
	r.add(res)
	return r.plainBatched(ctx)
}

// drainRelay seeds n events and times `relays` relays (each with its own
// pool and broker connection) draining them to JetStream; ackDelay > 0 wraps
// each publisher in ackDelayPublisher.
func (r *runner) drainRelay(ctx context.Context, n, keys, relays int, ackDelay time.Duration, cfg *relay.Config) (Result, error) {
	e, err := r.newEnv(ctx, "obb_drain", nil, 0)
	if err != nil {
		return Result{}, err
	}
	defer e.close()
	if err := e.seed(ctx, n, payloadSize, keys); err != nil {
		return Result{}, err
	}
	var rs []*relay.Relay
	for range relays {
		s, err := e.relayStore(ctx)
		if err != nil {
			return Result{}, err
		}
		var pub publishers.Publisher
		if pub, err = e.publisher(); err != nil {
			return Result{}, err
		}
		if ackDelay > 0 {
			pub = ackDelayPublisher{Publisher: pub, perAck: ackDelay}
		}
		rl, err := relay.New(s, pub, cfg)
		if err != nil {
			return Result{}, err
		}
		rs = append(rs, rl)
	}
	published := func() (n int64) {
		for _, rl := range rs {
			n += rl.Stats().Published
		}
		return n
	}
	rss := startRSS()
	cpu := e.startCPU()
	start := time.Now()
	for _, rl := range rs {
		if err := rl.Start(ctx); err != nil {
			return Result{}, err
		}
	}
	var el time.Duration
	for {
		if published() >= int64(n) {
			el = time.Since(start)
			break
		}
		if time.Since(start) > drainLimit {
			return Result{}, fmt.Errorf("published %d of %d in %v", published(), n, drainLimit)
		}
		time.Sleep(time.Millisecond)
	}
	peak := rss.peakMiB()
	metrics := cpu.perEvent(n)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, rl := range rs {
		if err := rl.Stop(sctx); err != nil {
			return Result{}, err
		}
	}
	if got, err := e.streamMsgs(ctx); err != nil || got < uint64(n) {
		return Result{}, fmt.Errorf("stream holds %d of %d messages (%v)", got, n, err)
	}
	return Result{Params: map[string]any{"n": n, "keys": keys, "relays": relays, "unordered": cfg.Unordered, "batch_size": or(cfg.BatchSize, relay.DefaultBatchSize),
		"workers": or(cfg.Workers, relay.DefaultWorkers), "ack_delay_ms": float64(ackDelay) / float64(time.Millisecond)},
		Metrics: merge(metrics, map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": peak, "rss_before_mib": rss.baseMiB()})}, nil
}

// merge returns a with b's entries added.
func merge(a, b map[string]float64) map[string]float64 {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func or(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// ackDelayPublisher makes the broker, not the 2-core CPU, the limit of the
// scale workload (the model of BenchmarkScaleSlowBroker in relay/). After
// the real JetStream publish of a call has returned, the call waits perAck
// more for each of its messages, as if the broker acknowledged them one
// after another, perAck each: a broker whose per-message cost (a replicated,
// fsynced write) is the bottleneck.
//
//   - The wait is a timer, so it burns no CPU: adding relays adds broker
//     capacity being waited on, not work for the two cores.
//   - It grows with the call's size, so a relay cannot hide it by batching:
//     one relay worker moves at most 1/perAck events per second however large
//     its batches (1,000 ev/s at 1ms). A fixed delay per call, as this
//     workload used before, is amortized by a batch of 500 and left the CPU
//     the limit.
//   - Calls from different workers and relays wait at the same time (the
//     broker serves producers in parallel, each one's acks in order), so
//     the bound is relays × workers / perAck, and scale-out shows as long as
//     the CPU keeps up with the rest.
type ackDelayPublisher struct {
	publishers.Publisher
	perAck time.Duration
}

func (p ackDelayPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := p.Publisher.Publish(ctx, msgs)
	t := time.NewTimer(time.Duration(len(msgs)) * p.perAck)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return errs
}

// textbook is baseline (a), the loop of the pattern's own example: select
// 100 rows FOR UPDATE SKIP LOCKED, publish each synchronously (waiting for
// JetStream's ack), update each row, commit. Its table has a partial index
// on the unpublished rows, so it is not handicapped by scanning history.
func (r *runner) textbook(ctx context.Context) error {
	n := r.o.BaselineN
	e, err := r.newEnv(ctx, "obb_textbook", nil, 0)
	if err != nil {
		return err
	}
	defer e.close()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE outbox (
			id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			event_id uuid NOT NULL,
			topic text NOT NULL,
			key text NOT NULL,
			payload bytea NOT NULL,
			created_at timestamptz NOT NULL DEFAULT now(),
			published_at timestamptz);
		CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL`); err != nil {
		return err
	}
	if _, err := e.pool.Exec(ctx, `INSERT INTO outbox (event_id, topic, key, payload)
		SELECT gen_random_uuid(), 'bench', (g % 1000)::text, convert_to(repeat('x', $2), 'UTF8')
		FROM generate_series(1, $1::int) g; `, n, payloadSize); err != nil {
		return err
	}
	if _, err := e.pool.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return err
	}
	rss := startRSS()
	start := time.Now()
	total := 0
	for total < n {
		if time.Since(start) > drainLimit {
			return fmt.Errorf("published %d of %d in %v", total, n, drainLimit)
		}
		got, err := textbookBatch(ctx, e)
		if err != nil {
			return err
		}
		total += got
	}
	el := time.Since(start)
	if err := e.waitStream(ctx, n, time.Minute, nil); err != nil {
		return err
	}
	r.add(Result{Workload: "drain", Case: "baseline: textbook loop", Params: map[string]any{"n": n, "batch": 100},
		Metrics: map[string]float64{"events_per_s": float64(n) / el.Seconds(), "seconds": el.Seconds(), "peak_rss_mib": rss.peakMiB()}})
	return nil
}

func textbookBatch(ctx context.Context, e *env) (int, error) {
	got := 0
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, event_id, topic, key, payload FROM outbox
			WHERE published_at IS NULL ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`)
		if err != nil {
			return err
		}
		type row struct {
			id         int64
			eid        uuid.UUID
			topic, key string
			payload    []byte
		}
		var batch []row
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.id, &x.eid, &x.topic, &x.key, &x.payload); err != nil {
				return err
			}
			batch = append(batch, x)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, x := range batch {
			m := &nats.Msg{Subject: e.name + "." + x.topic, Data: x.payload, Header: nats.Header{
				jetstream.MsgIDHeader: []string{x.eid.String()}, "Outbox-Key": []string{x.key},
			}}
			if _, err := e.js.PublishMsg(ctx, m); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE id = $1`, x.id); err != nil {
				return err
			}
		}
		got = len(batch)
		return nil
	})
	return got, err
}

// newStore is a store on pool for e's table.
func newStore(pool *pgxpool.Pool, e *env) (stores.Store, error) {
	db, err := postgres.New(pool, e.cfg)
	if err != nil {
		return nil, err
	}
	return db.Store(), nil
}

// relayStore is a store for one relay of a drain, on a pool of its own
// (for MySQL, a database opened by URL as `outbox relay` opens it).
func (e *env) relayStore(ctx context.Context) (stores.Store, error) {
	if e.my != nil {
		return e.my.open(ctx, e)
	}
	pool, err := e.extraPool(ctx, 0)
	if err != nil {
		return nil, err
	}
	return newStore(pool, e)
}

// mainStore is the store on e's own pool.
func (e *env) mainStore() stores.Store {
	if e.my != nil {
		return e.my.store
	}
	return e.store
}

// dbName names e's database server for the limits' cases.
func (e *env) dbName() string {
	if e.my != nil {
		return "MySQL"
	}
	return "PostgreSQL"
}
