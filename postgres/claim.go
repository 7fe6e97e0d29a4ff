package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/stores"
)

// Claim implements stores.Store. It opens a transaction, bounds it with
// idle_in_transaction_session_timeout = ClaimTimeout, and locks up to
// p.Limit due pending rows with FOR UPDATE SKIP LOCKED: rows another relay
// holds are skipped, never waited for. The transaction stays open while the
// relay publishes and ends in Complete or Abort; if the relay dies, the
// database ends it and the rows are claimable again at once.
//
// Keyed rows are claimed key by key (see keyedSQL): each key's head and,
// up to p.PerKey rows, the rows right after it, an unbroken run, so a key's
// rows in flight are always its next ones and never one out of turn. Keys are
// visited round-robin from where the last claim stopped, so no key starves.
// With p.Unordered, every due row of each key is claimable (see
// keyedUnorderedSQL), still walking keys round-robin. Unkeyed rows fill the
// rest of the batch by due time. Each part runs along an index of pending
// rows only.
//
// Every statement of the claim is planned afresh for the table as it is
// (plan_cache_mode = force_custom_plan, for the claim's transaction only):
// see claimSettingsSQL.
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, wrap("claim", err)
	}
	b := &batch{s: s, tx: tx}
	if err := s.claim(ctx, tx, p, b); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, wrap("claim", err)
	}
	if len(b.recs) == 0 {
		// Nothing claimed: end the transaction now rather than hold it.
		if err := b.Abort(ctx); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// claimSettingsSQL sets, for the claim's transaction only, the claim
// timeout ($1, in ms) and plan_cache_mode = force_custom_plan.
//
// The second keeps claims cheap when a backlog builds up. The claim
// statements are prepared once per connection, and after five executions
// PostgreSQL may keep a generic plan for them until the table is next
// vacuumed or analyzed or the connection closes. A relay that claims often
// while the table is nearly empty, as a LISTEN/NOTIFY wake-up on every
// commit makes it do, gets a generic plan made for an empty table: for
// ordered claims, a sequential scan of the table on the outside with every
// key's head looked up again for each row it meets. When a backlog builds
// up, each claim then costs pending rows × keys index probes (seconds to
// minutes for tens of thousands of events) and the relay falls further
// behind: the latency benchmark's "stall" under LISTEN/NOTIFY (after an
// empty VACUUM ANALYZE, the cached plan can instead scan the whole table
// for each key's head: as bad). A custom plan costs about 0.7ms of
// planning per claim and always sees the table's current size.
const claimSettingsSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true),
	set_config('plan_cache_mode', 'force_custom_plan', true)`

func (s *Store) claim(ctx context.Context, tx pgx.Tx, p stores.ClaimParams, b *batch) error {
	now := p.Now.UTC()
	timeout := strconv.FormatInt(s.cfg.ClaimTimeout.Milliseconds(), 10)
	// keyed queues the keyed claim of up to limit rows of the keys after
	// after (and up to upTo, when bounded).
	keyed := func(pb *pgx.Batch, bounded bool, limit int, after, upTo string) {
		args := []any{now, limit, after}
		if bounded {
			args = append(args, upTo)
		}
		if p.Unordered {
			pb.Queue(s.keyedUnorderedSQL(bounded), args...)
			return
		}
		pb.Queue(s.keyedSQL(bounded), append(args, max(1, p.PerKey))...)
	}

	// From the cursor to the last key, then from the first key up to the
	// cursor, then unordered rows: each step only if the batch is not full.
	cursor := s.cursor.Get()
	var pb pgx.Batch
	pb.Queue(claimSettingsSQL, timeout)
	keyed(&pb, false, p.Limit, cursor, "")
	if err := s.run(ctx, tx, &pb, 1, b, !p.Unordered); err != nil {
		return err
	}
	if len(b.recs) < p.Limit && cursor != "" {
		var pb pgx.Batch
		keyed(&pb, true, p.Limit-len(b.recs), "", cursor)
		if err := s.run(ctx, tx, &pb, 0, b, !p.Unordered); err != nil {
			return err
		}
	}
	s.cursor.Advance(cursor, len(b.recs) == p.Limit, recordKeys(b.recs))
	if left := p.Limit - len(b.recs); left > 0 {
		var pb pgx.Batch
		pb.Queue(`SELECT `+recordCols+` FROM `+s.nm.table+` WHERE status = 0 AND key = '' AND available_at <= $1
			ORDER BY available_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED`, now, left)
		return s.run(ctx, tx, &pb, 0, b, false)
	}
	return nil
}

// run sends pb and appends to b the rows of every query in it but the first
// skip (settings). With runs, the queries are keyedSQL's: each row carries
// its place in its key's run, and only unbroken runs are kept (see keepRuns).
func (s *Store) run(ctx context.Context, tx pgx.Tx, pb *pgx.Batch, skip int, b *batch, runs bool) error {
	br := tx.SendBatch(ctx, pb)
	for i := range pb.QueuedQueries {
		if i < skip {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return err
			}
			continue
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return err
		}
		if !runs {
			recs, err := pgx.CollectRows(rows, scanRecord)
			if err != nil {
				_ = br.Close()
				return err
			}
			b.recs = append(b.recs, recs...)
			continue
		}
		ranked, err := pgx.CollectRows(rows, scanRanked)
		if err != nil {
			_ = br.Close()
			return err
		}
		b.recs = append(b.recs, keepRuns(ranked)...)
	}
	return br.Close()
}

// ranked is a row of keyedSQL: a record and its place in its key's pending
// rows (1 for the head) in the statement's snapshot.
type ranked struct {
	rec  stores.Record
	rank int64
}

func scanRanked(r pgx.CollectableRow) (ranked, error) {
	var x ranked
	var available time.Time
	err := r.Scan(&x.rec.ID, &x.rec.Topic, &x.rec.Key, &x.rec.Type, &x.rec.Payload, &x.rec.Headers,
		&x.rec.CreatedAt, &available, &x.rec.Attempts, &x.rec.LastError, &x.rank)
	if available.After(x.rec.CreatedAt) && x.rec.Attempts == 0 {
		x.rec.NotBefore = available
	}
	return x, err
}

// keepRuns keeps, of each key's locked rows (which keyedSQL returns key by
// key, in the key's order), the unbroken run from the head: ranks 1, 2, 3 …
// up to the first missing one. A missing rank is a row another batch holds,
// one that is not due, or one completed since the snapshot: the rows after
// it must wait, and so must the whole key when the head is missing. The
// rows left out stay locked until this batch ends, untouched; no claim
// would take them before the head's successor anyway.
func keepRuns(rows []ranked) []stores.Record {
	out := make([]stores.Record, 0, len(rows))
	var key string
	var want int64
	for _, x := range rows {
		if x.rec.Key != key || want == 0 {
			key, want = x.rec.Key, 1
		}
		if x.rank == want {
			out = append(out, x.rec)
			want++
		} else {
			want = -1 // broken: nothing more of this key
		}
	}
	return out
}

// keyedSQL claims runs of keys: each key's head and the rows right after
// it, up to PerKey rows of a key (the last parameter), visiting keys in
// order from $3 (exclusive) and, when bounded, up to $4 (inclusive). A recursive CTE skips from key to key
// along the (key, seq) index of pending keyed rows, so the cost is per key
// visited plus per row taken, not per pending row; the query stops as soon
// as $2 rows are locked. Each row comes with its rank among its key's
// pending rows in the statement's snapshot (1 for the head), and
// keepRuns keeps only unbroken runs from rank 1.
//
// Rows are locked with SKIP LOCKED: a head another batch holds is in
// flight, and its key is passed over (keepRuns drops the rows after it). A
// row of a key whose head is not in the snapshot's list is never a
// candidate, because the list is computed from this statement's snapshot,
// in which a held head is still pending. When the holder has completed rows
// meanwhile, locking a now-changed row re-checks it (status, due time)
// against its latest version, so a row that was published, deleted or
// rescheduled is not taken either, and the run stops before it.
func (s *Store) keyedSQL(bounded bool) string {
	t := s.nm.table
	upper, perKey := "", "$4"
	if bounded {
		upper, perKey = " AND key <= $4", "$5"
	}
	return `WITH RECURSIVE keys(key) AS (
		(SELECT key FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $3` + upper + ` ORDER BY key LIMIT 1)
		UNION ALL
		SELECT (SELECT n.key FROM ` + t + ` n WHERE n.status = 0 AND n.key <> '' AND n.key > k.key` + upper + ` ORDER BY n.key LIMIT 1)
		FROM keys k WHERE k.key IS NOT NULL
	)
	SELECT ` + qualified("m", recordCols) + `, run.rank FROM keys k
	CROSS JOIN LATERAL (SELECT h.seq, row_number() OVER (ORDER BY h.seq) AS rank FROM ` + t + ` h
		WHERE h.key = k.key AND h.key <> '' AND h.status = 0 ORDER BY h.seq LIMIT ` + perKey + `) run
	JOIN ` + t + ` m ON m.seq = run.seq
	WHERE k.key IS NOT NULL AND m.status = 0 AND m.available_at <= $1
	LIMIT $2
	FOR UPDATE OF m SKIP LOCKED`
}

// keyedUnorderedSQL claims keyed rows with per-key order off: every due row,
// key by key from $3 (exclusive) up to $4 (inclusive, when bounded), along
// the (key, seq) index of pending keyed rows, skipping rows others hold.
func (s *Store) keyedUnorderedSQL(bounded bool) string {
	upper := ""
	if bounded {
		upper = " AND key <= $4"
	}
	return `SELECT ` + recordCols + ` FROM ` + s.nm.table + `
	WHERE status = 0 AND key <> '' AND key > $3` + upper + ` AND available_at <= $1
	ORDER BY key, seq LIMIT $2 FOR UPDATE SKIP LOCKED`
}

// qualified prefixes each column of a recordCols-style list with alias.
func qualified(alias, cols string) string {
	return alias + `.id, ` + alias + `.topic, ` + alias + `.key, ` + alias + `.type, ` + alias + `.payload, ` +
		alias + `.headers, ` + alias + `.created_at, ` + alias + `.available_at, ` + alias + `.attempts, coalesce(` +
		alias + `.last_error, '')`
}

// recordKeys returns the keys of recs, for the key cursor.
func recordKeys(recs []stores.Record) []string {
	keys := make([]string, len(recs))
	for i := range recs {
		keys[i] = recs[i].Key
	}
	return keys
}

type batch struct {
	s    *Store
	tx   pgx.Tx // nil once ended
	recs []stores.Record
}

func (b *batch) Records() []stores.Record { return b.recs }

// Complete applies o in one round trip (one statement per kind of outcome)
// and commits.
func (b *batch) Complete(ctx context.Context, o stores.Outcome) error {
	if b.tx == nil {
		if len(o.Published)+len(o.Retry)+len(o.Dead) == 0 {
			return nil
		}
		return errClosedBatch
	}
	tx := b.tx
	b.tx = nil
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after Commit

	t := b.s.nm.table
	var pb pgx.Batch
	if len(o.Published) > 0 {
		if o.DeletePublished {
			pb.Queue(`DELETE FROM `+t+` WHERE id = ANY($1)`, o.Published)
		} else {
			pb.Queue(`UPDATE `+t+` SET status = 1, published_at = $2 WHERE id = ANY($1)`, o.Published, o.Now.UTC())
		}
	}
	if len(o.Retry) > 0 {
		ids, errs, next := failureArrays(o.Retry)
		pb.Queue(`UPDATE `+t+` AS t SET attempts = t.attempts + 1, last_error = f.err, available_at = f.next
			FROM unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS f(id, err, next) WHERE t.id = f.id`, ids, errs, next)
	}
	if len(o.Dead) > 0 {
		ids, errs, _ := failureArrays(o.Dead)
		pb.Queue(`UPDATE `+t+` AS t SET status = 2, attempts = t.attempts + 1, last_error = f.err
			FROM unnest($1::uuid[], $2::text[]) AS f(id, err) WHERE t.id = f.id`, ids, errs)
	}
	if pb.Len() > 0 {
		if err := tx.SendBatch(ctx, &pb).Close(); err != nil {
			return wrap("complete", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return wrap("complete", err)
	}
	return nil
}

// Abort implements stores.Batch.
func (b *batch) Abort(ctx context.Context) error {
	if b.tx == nil {
		return nil
	}
	tx := b.tx
	b.tx = nil
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return wrap("abort", err)
	}
	return nil
}

func failureArrays(fs []stores.Failure) (ids []uuid.UUID, errs []string, next []time.Time) {
	ids = make([]uuid.UUID, len(fs))
	errs = make([]string, len(fs))
	next = make([]time.Time, len(fs))
	for i, f := range fs {
		ids[i], errs[i], next[i] = f.ID, f.Err, f.NextAttempt.UTC()
	}
	return ids, errs, next
}

// RunInTx implements stores.TxRunner: fn runs under a savepoint of the
// claim's transaction.
func (b *batch) RunInTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if b.tx == nil {
		return errClosedBatch
	}
	return pgx.BeginFunc(ctx, b.tx, fn)
}
