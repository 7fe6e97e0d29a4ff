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
// Keyed rows are claimed key by key (see keyedSQL): each key's head only,
// so a key never has two rows in flight and never one out of turn. Keys are
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
	keyed := s.keyedSQL
	if p.Unordered {
		keyed = s.keyedUnorderedSQL
	}

	// From the cursor to the last key, then from the first key up to the
	// cursor, then unordered rows: each step only if the batch is not full.
	cursor := s.cursor.Get()
	var pb pgx.Batch
	pb.Queue(claimSettingsSQL, timeout)
	pb.Queue(keyed(false), now, p.Limit, cursor)
	if err := s.run(ctx, tx, &pb, 1, b); err != nil {
		return err
	}
	full := len(b.recs) == p.Limit
	if !full && cursor != "" {
		var pb pgx.Batch
		pb.Queue(keyed(true), now, p.Limit-len(b.recs), "", cursor)
		if err := s.run(ctx, tx, &pb, 0, b); err != nil {
			return err
		}
	}
	s.cursor.Advance(cursor, len(b.recs) == p.Limit, recordKeys(b.recs))
	if left := p.Limit - len(b.recs); left > 0 {
		var pb pgx.Batch
		pb.Queue(`SELECT `+recordCols+` FROM `+s.nm.table+` WHERE status = 0 AND key = '' AND available_at <= $1
			ORDER BY available_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED`, now, left)
		return s.run(ctx, tx, &pb, 0, b)
	}
	return nil
}

// run sends pb and appends to b the rows of every query in it but the first
// skip (settings).
func (s *Store) run(ctx context.Context, tx pgx.Tx, pb *pgx.Batch, skip int, b *batch) error {
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
		recs, err := pgx.CollectRows(rows, scanRecord)
		if err != nil {
			_ = br.Close()
			return err
		}
		b.recs = append(b.recs, recs...)
	}
	return br.Close()
}

// keyedSQL claims the heads of keys, visiting keys in order from $3
// (exclusive) and, when bounded, up to $4 (inclusive). A recursive CTE skips
// from key to key along the (key, seq) index of pending keyed rows, so the
// cost is per key visited, not per pending row; the query stops as soon as
// $2 heads are locked.
//
// A head is locked with SKIP LOCKED: a head another batch holds is in
// flight, and its key is passed over. A later row of that key is never a
// candidate, because the head is computed from this statement's snapshot,
// in which the held head is still pending. When the holder has completed
// the head meanwhile, locking the now-changed row re-checks it (status,
// due time) against its latest version, so a head that was published,
// deleted or rescheduled is not taken either.
func (s *Store) keyedSQL(bounded bool) string {
	t := s.nm.table
	upper := ""
	if bounded {
		upper = " AND key <= $4"
	}
	return `WITH RECURSIVE keys(key) AS (
		(SELECT key FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $3` + upper + ` ORDER BY key LIMIT 1)
		UNION ALL
		SELECT (SELECT n.key FROM ` + t + ` n WHERE n.status = 0 AND n.key <> '' AND n.key > k.key` + upper + ` ORDER BY n.key LIMIT 1)
		FROM keys k WHERE k.key IS NOT NULL
	)
	SELECT ` + qualified("m", recordCols) + ` FROM keys k
	CROSS JOIN LATERAL (SELECT h.seq FROM ` + t + ` h WHERE h.key = k.key AND h.key <> '' AND h.status = 0 ORDER BY h.seq LIMIT 1) head
	JOIN ` + t + ` m ON m.seq = head.seq
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
