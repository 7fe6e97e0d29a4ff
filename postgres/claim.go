package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxgo/outbox/internal/sqlkit"
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
// so a key never has two rows in flight from two batches and never one out
// of turn, and with p.PerKey at most a quarter of p.Limit keys (see
// sqlkit.HeadLimit). Keys are visited round-robin from where the last claim
// stopped, so no key starves. Unkeyed rows then take up to half the room left (all
// of it without p.PerKey), by due time; then, with p.PerKey, the rest goes
// to the runs after the heads claimed (see runsSQL), shared evenly among
// their keys: a claim that finds few keys takes long runs of each, one that
// finds many takes their heads. With p.Unordered, every due row of each key
// is claimable (see keyedUnorderedSQL), still walking keys round-robin.
// Each part runs along an index of pending rows only.
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
//
// enable_sort = off keeps the claims on their indexes when the table's
// statistics are behind, as after a burst into a table last analyzed
// while nearly empty (autovacuum analyzes it up to a minute later, or
// never where it is off). Estimating a few dozen pending rows, PostgreSQL
// would rather collect every pending row of the keys after the cursor by
// bitmap and sort them than walk the (key, seq) index: 60,000 rows sorted
// (on disk) for every claim of 1,000, 120ms instead of 10 (pgcdc's
// BenchmarkDrain, where the unordered relay drained a fresh burst at a
// quarter of the ordered one's rate). Every claim statement reads an index
// in the order it returns, so no plan it wants has a sort of the table's
// rows; the sorts left (the runs' order, a few thousand claimed rows at
// most) are made anyway. See TestClaimPlansWithoutStatistics.
const claimSettingsSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true),
	set_config('plan_cache_mode', 'force_custom_plan', true), set_config('enable_sort', 'off', true)`

func (s *Store) claim(ctx context.Context, tx pgx.Tx, p stores.ClaimParams, b *batch) error {
	now := p.Now.UTC()
	timeout := strconv.FormatInt(s.cfg.ClaimTimeout.Milliseconds(), 10)
	var heads []numbered // the keyed heads claimed and their seqs, ordered mode
	// keyed queues the keyed claim of up to limit rows of the keys after
	// after (and up to upTo, when bounded).
	keyed := func(pb *pgx.Batch, bounded bool, limit int, after, upTo string) {
		args := []any{now, limit, after}
		if bounded {
			args = append(args, upTo)
		}
		if p.Unordered {
			pb.Queue(s.keyedUnorderedSQL(bounded), args...)
		} else {
			pb.Queue(s.keyedSQL(bounded), args...)
		}
	}
	collect := func(pb *pgx.Batch, skip int) error {
		if p.Unordered {
			return run(ctx, tx, pb, skip, scanRecord, func(r stores.Record) { b.recs = append(b.recs, r) })
		}
		return run(ctx, tx, pb, skip, scanNumbered, func(h numbered) {
			b.recs, heads = append(b.recs, h.rec), append(heads, h)
		})
	}

	// From the cursor to the last key, then from the first key up to the
	// cursor, then unkeyed rows, then the runs after the heads: each step
	// only if the batch is not full.
	cursor := s.cursor.Get()
	limit := p.Limit
	if !p.Unordered {
		limit = sqlkit.HeadLimit(p.Limit, p.PerKey)
	}
	var pb pgx.Batch
	pb.Queue(claimSettingsSQL, timeout)
	keyed(&pb, false, limit, cursor, "")
	if err := collect(&pb, 1); err != nil {
		return err
	}
	if len(b.recs) < limit && cursor != "" {
		var pb pgx.Batch
		keyed(&pb, true, limit-len(b.recs), "", cursor)
		if err := collect(&pb, 0); err != nil {
			return err
		}
	}
	s.cursor.Advance(cursor, len(b.recs) == limit, recordKeys(b.recs))
	runs := len(heads) > 0 && p.PerKey > 1
	if runs {
		b.ends = make([]runEnd, len(heads))
		for i, h := range heads {
			b.ends[i] = runEnd{key: h.rec.Key, seq: h.n}
		}
	}
	if room := p.Limit - len(b.recs); room > 0 {
		room = sqlkit.UnkeyedRoom(room, runs)
		var pb pgx.Batch
		pb.Queue(s.unkeyedSQL(), now, room)
		if err := run(ctx, tx, &pb, 0, scanRecord, func(r stores.Record) { b.recs = append(b.recs, r) }); err != nil {
			return err
		}
	}
	if room := p.Limit - len(b.recs); runs && room > 0 {
		per := sqlkit.RunLength(room, len(heads), p.PerKey)
		if err := s.claimRuns(ctx, tx, p.Now, b, per, room); err != nil {
			return err
		}
		// Every key due and free was reached when fewer heads than the
		// limit were found: the batch may be continued (see Continue).
		b.continuable = len(heads) < limit && len(b.ends) > 0
		return nil
	}
	b.ends = nil
	return nil
}

// runEnd is the last row of a key's run in a batch: where a continuation
// of the batch starts (see runsSQL).
type runEnd struct {
	key string
	seq int64
}

// claimRuns adds to b up to room rows, the runs after b.ends, at most per
// of each key (see runsSQL), and moves b.ends to their ends. It keeps in
// b.ends only the keys whose run took all per rows: the others have no
// more rows due and free, so nothing to continue.
func (s *Store) claimRuns(ctx context.Context, tx pgx.Tx, now time.Time, b *batch, per, room int) error {
	keys := make([]string, len(b.ends))
	seqs := make([]int64, len(b.ends))
	at := make(map[string]int, len(b.ends))
	for i, e := range b.ends {
		keys[i], seqs[i], at[e.key] = e.key, e.seq, i
	}
	var pb pgx.Batch
	pb.Queue(s.runsSQL(), keys, seqs, per, now.UTC())
	var rows []numbered
	if err := run(ctx, tx, &pb, 0, scanRun, func(x numbered) { rows = append(rows, x) }); err != nil {
		return err
	}
	// The last key's run may be cut short: still a run. The rows left out
	// stay locked, untouched, until the batch ends.
	kept := keepRuns(rows)
	taken := make([]int, len(b.ends))
	for _, x := range kept[:min(len(kept), room)] {
		b.recs = append(b.recs, x.rec)
		i := at[x.rec.Key]
		b.ends[i].seq = x.seq
		taken[i]++
	}
	full := b.ends[:0]
	for i, e := range b.ends {
		if taken[i] == per {
			full = append(full, e)
		}
	}
	b.ends = full
	return nil
}

// run sends pb and passes to add, scanned by scan, the rows of every query
// in it but the first skip (settings).
func run[T any](ctx context.Context, tx pgx.Tx, pb *pgx.Batch, skip int, scan pgx.RowToFunc[T], add func(T)) error {
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
		got, err := pgx.CollectRows(rows, scan)
		if err != nil {
			_ = br.Close()
			return err
		}
		for _, x := range got {
			add(x)
		}
	}
	return br.Close()
}

// numbered is a row of keyedSQL or runsSQL: a record and the number its
// columns end with, a head's seq (keyedSQL) or a run row's rank after its
// key's head, 1 for the row right after it, in the statement's snapshot
// (runsSQL).
type numbered struct {
	rec stores.Record
	n   int64
	seq int64 // runsSQL: the row's seq
}

func scanNumbered(r pgx.CollectableRow) (numbered, error) {
	var x numbered
	err := x.scan(r)
	return x, err
}

// scanRun scans a row of runsSQL, which ends with the row's seq.
func scanRun(r pgx.CollectableRow) (numbered, error) {
	var x numbered
	err := x.scan(r, &x.seq)
	return x, err
}

func (x *numbered) scan(r pgx.CollectableRow, more ...any) error {
	var available time.Time
	dst := append([]any{&x.rec.ID, &x.rec.Topic, &x.rec.Key, &x.rec.Type, &x.rec.Payload, &x.rec.Headers,
		&x.rec.CreatedAt, &available, &x.rec.Attempts, &x.rec.LastError, &x.n}, more...)
	err := r.Scan(dst...)
	setNotBefore(&x.rec, available)
	return err
}

// keepRuns keeps, of each key's locked rows (which runsSQL returns key by
// key, in the key's order), the unbroken run: ranks 1, 2, 3 … up to the
// first missing one. A missing rank is a row that is not due, one another
// batch holds (a relay in unordered mode may), or one gone since the
// snapshot: the rows after it must wait.
func keepRuns(rows []numbered) []numbered {
	out := make([]numbered, 0, len(rows))
	var key string
	var want int64
	for i, x := range rows {
		if i == 0 || x.rec.Key != key {
			key, want = x.rec.Key, 1
		}
		if x.n == want { // its rank
			out = append(out, x)
			want++
		} else {
			want = -1 // broken: nothing more of this key
		}
	}
	return out
}

// keyedSQL claims the heads of keys, visiting keys in order from $3
// (exclusive) and, when bounded, up to $4 (inclusive), and returns each
// head's seq after its columns. A recursive CTE skips from key to key along
// the (key, seq) index of pending keyed rows, one probe per key: the first
// entry after key k is the next key's lowest seq, its head. So the cost is
// per key visited, not per pending row; the query stops as soon as $2
// heads are locked.
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
	return `WITH RECURSIVE keys(key, seq) AS (
		(SELECT key, seq FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $3` + upper + ` ORDER BY key, seq LIMIT 1)
		UNION ALL
		SELECT n.key, n.seq FROM keys k CROSS JOIN LATERAL (
			SELECT n.key, n.seq FROM ` + t + ` n WHERE n.status = 0 AND n.key <> '' AND n.key > k.key` + upper + `
			ORDER BY n.key, n.seq LIMIT 1) n
	)
	SELECT ` + qualified("m", recordCols) + `, m.seq FROM keys k
	JOIN ` + t + ` m ON m.seq = k.seq
	WHERE m.status = 0 AND m.available_at <= $1
	LIMIT $2
	FOR UPDATE OF m SKIP LOCKED`
}

// runsSQL claims, for each key of $1 whose head (seq $2, same position)
// this batch holds, up to $3 of the pending rows right after the head that
// are due at $4, each with its rank after the head (1 for the next row)
// and its seq,
// key by key in $1's order and each key's in seq order; keepRuns keeps the
// unbroken runs. Each key costs one range of the (key, seq) index, at most
// $3 rows long, however deep its backlog.
//
// Why a run never holds a row out of turn: the batch holds the key's head,
// so no other ordered claim takes any row of the key (they are not heads,
// and runs are only taken behind a held head); rows of the key committed
// later have higher seqs (writers of one key take turns on its advisory
// lock, so seqs follow commit order). A row another batch holds anyway (a
// relay in unordered mode) is skipped, and keepRuns ends the run before it,
// as it does at a row not due.
func (s *Store) runsSQL() string {
	t := s.nm.table
	return `SELECT ` + qualified("m", recordCols) + `, run.rank, m.seq
	FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k(key, head, ord)
	CROSS JOIN LATERAL (SELECT h.seq, row_number() OVER (ORDER BY h.seq) AS rank FROM ` + t + ` h
		WHERE h.key = k.key AND h.key <> '' AND h.status = 0 AND h.seq > k.head ORDER BY h.seq LIMIT $3) run
	JOIN ` + t + ` m ON m.seq = run.seq
	WHERE m.status = 0 AND m.available_at <= $4
	ORDER BY k.ord, run.rank
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

// unkeyedSQL claims up to $2 unkeyed rows due at $1, by due time, along the
// (available_at, seq) index of pending unkeyed rows.
func (s *Store) unkeyedSQL() string {
	return `SELECT ` + recordCols + ` FROM ` + s.nm.table + ` WHERE status = 0 AND key = '' AND available_at <= $1
	ORDER BY available_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED`
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

	ends        []runEnd // ordered: the last row of each key whose run is full (it may have more)
	continuable bool     // ordered, the claim reached every key due and free, and some run is full
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
			pb.Queue(`DELETE FROM `+t+` WHERE id = ANY($1)`, pgIDs(o.Published))
		} else {
			pb.Queue(`UPDATE `+t+` SET status = 1, published_at = $2 WHERE id = ANY($1)`, pgIDs(o.Published), o.Now.UTC())
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

// pgIDs converts ids for pgx, which encodes a []pgtype.UUID as a binary
// uuid[] directly; a []uuid.UUID goes through each element's
// driver.Valuer, formatting and parsing every ID as text (a sixth of the
// relay's CPU per event in a profile).
func pgIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgtype.UUID{Bytes: id, Valid: true}
	}
	return out
}

func failureArrays(fs []stores.Failure) (ids []pgtype.UUID, errs []string, next []time.Time) {
	ids = make([]pgtype.UUID, len(fs))
	errs = make([]string, len(fs))
	next = make([]time.Time, len(fs))
	for i, f := range fs {
		ids[i], errs[i], next[i] = pgtype.UUID{Bytes: f.ID, Valid: true}, f.Err, f.NextAttempt.UTC()
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
