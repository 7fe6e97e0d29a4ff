package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// claimSQL locks up to ? due pending rows in claim order. FORCE INDEX keeps
// the plan on the pending range whatever the optimizer thinks of the
// table's statistics. It is the claim of ClaimParams.Unordered.
func claimSQL(table string) string {
	return `SELECT seq, ` + recordCols + ` FROM ` + table + ` FORCE INDEX (pending)
		WHERE status = ` + statusPending + ` AND available_at <= ?
		ORDER BY available_at, seq LIMIT ? FOR UPDATE SKIP LOCKED`
}

// headsSQL lists the heads of up to ? keys — each key's lowest pending
// seq, due or not — in key order, after the key ? (and, when bounded, up to
// the key ?): a loose index scan of pending_keys, one index dive per key
// however many rows each key has pending. It is a plain consistent read
// (the statement's snapshot S): it locks nothing. Blank keys — the empty
// key and keys of spaces only, which the PAD SPACE collation compares
// equal to it — are left to blankClaimSQL (key > ”). Keys equal but for
// trailing spaces ("a", "a ") are one group here, whose MIN(seq) is the
// head of one of them: they take turns as if they were one key, which
// keeps each one's order and costs only parallelism.
func headsSQL(table string, bounded bool) string {
	upper := ""
	if bounded {
		upper = " AND `key` <= ?"
	}
	return "SELECT `key`, MIN(seq) FROM " + table + " FORCE INDEX (pending_keys)" +
		" WHERE status = " + statusPending + " AND `key` <> '' AND (? = '' OR `key` > ?)" + upper +
		" GROUP BY status, `key` ORDER BY status, `key` LIMIT ?"
}

// lockHeadsSQL locks, among the heads headsSQL listed (seqs), up to limit
// that are still pending and due at now (a DATETIME as dbTime writes it),
// oldest first, by primary key: FOR UPDATE SKIP LOCKED reads each one's
// latest version and skips those another batch holds. Why this never
// claims a row out of turn: a listed row R is the head of its key in S, so
// every row of the key with a lower seq was published, dead or deleted in
// S — and none can be pending again later but by Replay, the operator's
// choice; rows of the key committed after S have higher seqs (writers of a
// key take turns on the key-lock table, so a key's seqs follow commit
// order) and are not listed. If R stopped being the head since S, it is no
// longer pending (published by another batch), and the recheck drops it. A
// listed head held by another batch is skipped, and its successors were
// never listed: the key waits. A head not due (a retry, NotBefore) fails
// the recheck and its key waits as a whole. The rows after a locked head
// are taken by runSQL and lockRunSQL (see Store.runs).
//
// The statement is built per claim and names its values as literals
// (integers, and a time of digits and separators only), so it goes out as
// text in one round trip, not as a statement to prepare, run and close.
func lockHeadsSQL(table string, seqs []uint64, now string, limit int) string {
	var b strings.Builder
	b.WriteString("SELECT seq, " + recordCols + " FROM " + table + " FORCE INDEX (PRIMARY) WHERE seq IN (")
	writeSeqs(&b, seqs)
	b.WriteString(") AND status = " + statusPending + " AND available_at <= '" + now + "' ORDER BY seq LIMIT " +
		strconv.Itoa(limit) + " FOR UPDATE SKIP LOCKED")
	return b.String()
}

// writeSeqs writes seqs as a list of integer literals.
func writeSeqs(b *strings.Builder, seqs []uint64) {
	for i, q := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(q, 10))
	}
}

// blankClaimSQL claims along pending_keys the rows of the blank keys — the
// empty key and keys of spaces only, which the PAD SPACE collation compares
// equal to it (key = ”) — normally just the unkeyed rows, oldest first. An
// unkeyed row is always taken; a row with a (blank) key only when it is its
// key's head, the lowest seq among the key's pending rows, due or not:
//
//	seq = (SELECT seq FROM t AS h WHERE h.status = pending AND h.key = t.key
//	       ORDER BY seq LIMIT 1)
//
// (keys are compared by length too: utf8mb4_bin ignores trailing spaces,
// and "a" and "a " are two keys; LENGTH(key) = 0 is the empty key for the
// same reason). Why this never claims a row out of turn, given InnoDB's
// semantics in the claim's READ COMMITTED transaction:
//
//   - The outer read locks. Each candidate is locked before the WHERE is
//     evaluated on it (a row another batch holds is skipped, SKIP LOCKED),
//     its latest committed version is read and, if the WHERE rejects it,
//     its lock is released at once (READ COMMITTED releases the locks of
//     non-matching rows).
//   - The subquery does not lock: a locking clause applies to the tables
//     of its own query block only. It is a consistent read from the
//     statement's snapshot S, taken when the statement first reads.
//
// Take a key with head H (seq h) and a later row R (seq r > h), and a claim
// that locks R and checks it. R is taken only if, in S, no pending row of
// the key has a seq below r, that is, H was already published, deleted or
// dead (committed) in S. While H is in flight, its batch has not committed
// any change to H, so S sees H pending and R is rejected; if H goes back to
// waiting (a retry), it is still pending in every snapshot. Conversely, S
// may be older than the row versions the outer read sees: a row committed
// after S is not in S at all (so the subquery cannot return its seq, and it
// is not taken this time), and a head completed after S still looks
// pending (so its successor waits for the next claim). Staleness only
// delays; it never lets a non-head through. Rows of the key with a seq
// below r that S cannot see because they are not committed yet do not
// exist: writers of one key take their turns on the key-lock table (see
// DB.InsertTx), so a key's seqs are handed out in commit order.
//
// The head itself is taken only if its lock is free (no other batch holds
// it) and, checked on its latest version, it is still pending and due: a
// head that waits for a retry or a NotBefore is not due, and its key waits
// as a whole, since no later row is its head. Two claims racing for one
// head: one locks it, the other skips it.
//
// The claim never waits for a lock: the outer read skips, the subquery
// does not lock. A rejected row is locked for the time of one check.
func blankClaimSQL(table string) string {
	return `SELECT seq, ` + recordCols + ` FROM ` + table + ` AS t FORCE INDEX (pending)
		WHERE t.status = ` + statusPending + " AND t.`key` = '' AND t.available_at <= ?" + `
		AND (LENGTH(t.` + "`key`" + `) = 0 OR t.seq = (
			SELECT h.seq FROM ` + table + ` AS h FORCE INDEX (pending_keys)
			WHERE h.status = ` + statusPending + ` AND h.` + "`key`" + ` = t.` + "`key`" + `
			AND LENGTH(h.` + "`key`" + `) = LENGTH(t.` + "`key`" + `)
			ORDER BY h.seq LIMIT 1))
		ORDER BY t.available_at, t.seq LIMIT ? FOR UPDATE SKIP LOCKED`
}

// blankProbeSQL says, with one dive into pending_keys, whether any blank
// key has a pending row: blankClaimSQL walks the pending rows in due order
// and skips the keyed ones, so without this a claim would pass over the
// whole keyed backlog to find no unkeyed row.
func blankProbeSQL(table string) string {
	return "SELECT 1 FROM " + table + " FORCE INDEX (pending_keys) WHERE status = " + statusPending + " AND `key` = '' LIMIT 1"
}

// headsPerClaim is how many heads a claim of n lists: more than n, since
// some are held by other batches or not due.
func headsPerClaim(n int) int { return 2 * n }

// claimOrdered runs the ordered claim in tx: the heads of keys from the
// store's cursor on (then from the first key up to the cursor), locked by
// lockHeadsSQL; then blank-key rows; then, with p.PerKey > 1, the runs
// after the heads (see runs), for at most maxRunKeys of them. With runs,
// the blank-key rows take at most half the room the heads leave
// (sqlkit.UnkeyedRoom), the rest going to the runs; blank keys get no
// runs. The batch holds the keyed rows in seq order, then the blank-key
// rows.
//
// The claim sets b.ends and b.continuable for a continuation (see
// batch.Continue) when it reached every key due and free — the walk ran
// through all keys and found fewer heads than it may lock — and gave
// each key's run its share.
func (s *Store) claimOrdered(ctx context.Context, tx *sql.Tx, now string, p stores.ClaimParams, b *batch) error {
	limit := p.Limit // no cap on the walk: see maxRunKeys
	cursor := s.cursor.Get()
	want := headsPerClaim(limit)
	keys, seqs, err := s.heads(ctx, tx, false, cursor, "", want)
	if err != nil {
		return err
	}
	next := "" // a short list ran to the last key: start again from the first
	if n := len(seqs); n == want {
		next = keys[n-1]
	} else if cursor != "" {
		k2, s2, err := s.heads(ctx, tx, true, "", cursor, want-n)
		if err != nil {
			return err
		}
		seqs = append(seqs, s2...)
		if len(s2) == want-n {
			next = k2[len(k2)-1]
		}
	}
	s.cursor.Set(next)
	var heads []seqRecord
	if len(seqs) > 0 {
		if heads, err = querySeqRecords(ctx, tx, lockHeadsSQL(s.table, seqs, now, limit)); err != nil {
			return err
		}
	}
	runs := p.PerKey > 1 && len(heads) > 0
	var blank []seqRecord
	if room := p.Limit - len(heads); room > 0 {
		if blank, err = s.claimBlank(ctx, tx, now, sqlkit.UnkeyedRoom(room, runs)); err != nil {
			return err
		}
	}
	keyed := heads
	if room := p.Limit - len(heads) - len(blank); runs && room > 0 {
		var shared bool
		if keyed, b.ends, shared, err = s.runs(ctx, tx, now, heads, room, p.PerKey-1); err != nil {
			return err
		}
		b.continuable = shared && next == "" && len(heads) < limit && len(b.ends) > 0
	}
	b.hold(keyed)
	b.hold(blank)
	return nil
}

// claimBlank claims up to n rows of the blank keys (blankClaimSQL), after
// a probe that there is any.
func (s *Store) claimBlank(ctx context.Context, tx *sql.Tx, now string, n int) ([]seqRecord, error) {
	var one int
	switch err := tx.QueryRowContext(ctx, s.blankProbeSQL).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return querySeqRecords(ctx, tx, s.blankClaimSQL, now, n)
}

// heads runs headsSQL.
func (s *Store) heads(ctx context.Context, tx *sql.Tx, bounded bool, after, upTo string, n int) (keys []string, seqs []uint64, err error) {
	args := []any{after, after}
	q := s.headsSQL
	if bounded {
		args, q = append(args, upTo), s.headsBoundedSQL
	}
	rows, err := tx.QueryContext(ctx, q, append(args, n)...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k   string
			seq uint64
		)
		if err := rows.Scan(&k, &seq); err != nil {
			return nil, nil, err
		}
		keys, seqs = append(keys, k), append(seqs, seq)
	}
	return keys, seqs, rows.Err()
}

// Claim implements stores.Store. It takes a connection of its own, bounds
// its session (see ClaimTimeout), opens a READ COMMITTED transaction and
// locks up to p.Limit due pending rows with FOR UPDATE SKIP LOCKED: rows
// another relay holds are skipped, never waited for. The transaction stays
// open while the relay publishes and ends in Complete or Abort, not when ctx
// ends; if the relay dies or stalls, the server ends it and the rows are
// claimable again.
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("mysql: claim: limit is %d, must be positive", p.Limit)
	}
	b, err := s.begin(ctx)
	if err != nil {
		return nil, wrap("claim", err)
	}
	if p.Unordered {
		var recs []seqRecord
		recs, err = querySeqRecords(ctx, b.tx, s.claimSQL, dbTime(p.Now), p.Limit)
		b.hold(recs)
	} else {
		err = s.claimOrdered(ctx, b.tx, dbTime(p.Now), p, b)
	}
	if err != nil {
		_ = b.Abort(ctx)
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

// begin takes a connection of its own, bounds its session and opens the
// claim's transaction, for Claim and batch.Continue.
func (s *Store) begin(ctx context.Context) (*batch, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := s.session(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	b := &batch{s: s, conn: conn, sess: sess}
	if _, err := conn.ExecContext(ctx, sess.set); err != nil {
		b.release(ctx, true)
		return nil, err
	}
	// database/sql rolls a transaction back when its context ends; a claim
	// must last until Complete or Abort instead.
	b.tx, err = conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		b.release(ctx, false)
		return nil, err
	}
	return b, nil
}

type batch struct {
	s    *Store
	conn *sql.Conn // nil once released
	tx   *sql.Tx   // nil once ended
	sess *session
	recs []stores.Record
	seqs map[uuid.UUID]uint64 // of recs: Complete names rows by primary key

	ends        []runEnd // ordered: the last row of each key whose run was full (it may have more)
	continuable bool     // ordered: the claim reached every key due and free, gave each its share, and some run was full
}

func (b *batch) Records() []stores.Record { return b.recs }

// hold adds rs to b's records.
func (b *batch) hold(rs []seqRecord) {
	if b.seqs == nil {
		b.seqs = make(map[uuid.UUID]uint64, len(rs))
	}
	for _, r := range rs {
		b.recs = append(b.recs, r.rec)
		b.seqs[r.rec.ID] = r.seq
	}
}

// Complete applies o, one statement per kind of outcome, and commits.
func (b *batch) Complete(ctx context.Context, o stores.Outcome) error {
	if b.tx == nil {
		if len(o.Published)+len(o.Retry)+len(o.Dead) == 0 {
			return nil
		}
		return errClosedBatch
	}
	tx := b.tx
	b.tx = nil
	err := b.s.apply(ctx, tx, o, b.seqs)
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	b.release(ctx, false)
	if err != nil {
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
	err := tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		err = nil
	}
	// A connection that failed to roll back is closed, which ends the
	// transaction in the server all the same.
	b.release(ctx, err != nil)
	if err != nil {
		return wrap("abort", err)
	}
	return nil
}

// release restores the claim's session settings and gives the connection
// back to the pool, or closes it when broken is set or the restore fails.
func (b *batch) release(ctx context.Context, broken bool) {
	conn := b.conn
	if conn == nil {
		return
	}
	b.conn = nil
	if !broken {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		_, err := conn.ExecContext(rctx, b.sess.restore)
		cancel()
		if err != nil {
			broken = true
			b.s.log.Warn("closing a claim connection: its session settings could not be restored", "table", b.s.cfg.Table, "error", err)
		}
	}
	if broken {
		// Returning ErrBadConn makes database/sql close the connection
		// instead of pooling it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// apply runs o's statements in tx: one per kind of outcome (more only past
// maxStatementRows records or maxStatementBytes of errors). Published
// records the batch holds (held: their seqs) are named by primary key, as
// JSON_TABLE rows written into the statement (numbers only), which goes
// out as text in one round trip: one primary-key lookup per row, where
// the unique id would add a lookup in its index to each. Failures, and any
// record not held, are named as JSON_TABLE rows joined on the unique id
// (see sqlkit.IDsJSON).
func (s *Store) apply(ctx context.Context, tx *sql.Tx, o stores.Outcome, held map[uuid.UUID]uint64) error {
	var seqs []uint64
	var ids []uuid.UUID
	for _, id := range o.Published {
		if seq, ok := held[id]; ok {
			seqs = append(seqs, seq)
		} else {
			ids = append(ids, id)
		}
	}
	set := ` SET t.status = ` + statusPublished + `, t.published_at = '` + dbTime(o.Now) + `'`
	err := chunks(len(seqs), maxStatementRows, func(int) int { return 20 }, func(lo, hi int) error {
		rows := `JSON_TABLE('` + seqsJSON(seqs[lo:hi]) + `', '$[*]' COLUMNS (seq BIGINT UNSIGNED PATH '$')) AS f STRAIGHT_JOIN ` +
			s.table + ` AS t FORCE INDEX (PRIMARY) ON t.seq = f.seq`
		var err error
		if o.DeletePublished {
			_, err = tx.ExecContext(ctx, `DELETE t FROM `+rows)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE `+rows+set)
		}
		return err
	})
	if err != nil {
		return err
	}
	err = chunks(len(ids), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
		ids := sqlkit.IDsJSON(ids[lo:hi])
		var err error
		if o.DeletePublished {
			_, err = tx.ExecContext(ctx, `DELETE t FROM `+s.idRows, ids)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE `+s.idRows+set, ids)
		}
		return err
	})
	if err != nil {
		return err
	}
	if err := s.fail(ctx, tx, o.Retry, true); err != nil {
		return err
	}
	return s.fail(ctx, tx, o.Dead, false)
}

// fail records failures: for retries, attempts+1, the error and the next
// attempt's time; for the dead, attempts+1, the error and status dead. Each
// row's values come in the JSON array with its id.
func (s *Store) fail(ctx context.Context, tx *sql.Tx, fs []stores.Failure, retry bool) error {
	if len(fs) == 0 {
		return nil
	}
	rows := make([]failureRow, len(fs))
	for i, f := range fs {
		rows[i] = failureRow{ID: hex.EncodeToString(f.ID[:]), Err: errText(f.Err)}
		if retry {
			rows[i].Next = dbTime(f.NextAttempt)
		}
	}
	cols := `id CHAR(32) PATH '$.id', err TEXT PATH '$.err'`
	set := `t.attempts = t.attempts + 1, t.last_error = f.err, t.status = ` + statusDead
	if retry {
		cols += `, next DATETIME(6) PATH '$.next'`
		set = `t.attempts = t.attempts + 1, t.last_error = f.err, t.available_at = f.next`
	}
	q := `UPDATE JSON_TABLE(?, '$[*]' COLUMNS (` + cols + `)) AS f STRAIGHT_JOIN ` + s.table +
		` AS t FORCE INDEX (id) ON t.id = UNHEX(f.id) SET ` + set
	size := func(i int) int { return 100 + len(rows[i].Err) }
	return chunks(len(rows), maxStatementRows, size, func(lo, hi int) error {
		js, err := json.Marshal(rows[lo:hi])
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, q, string(js))
		return err
	})
}

// failureRow is one element of fail's JSON array.
type failureRow struct {
	ID   string `json:"id"` // hex
	Err  string `json:"err"`
	Next string `json:"next,omitempty"`
}

// errClosedBatch is returned by Complete on a batch already ended.
var errClosedBatch = errors.New("mysql: batch already completed or aborted")

// uuidFromBytes reads a BINARY(16) id.
func uuidFromBytes(b []byte) (uuid.UUID, error) {
	id, err := uuid.FromBytes(b)
	if err != nil {
		return id, fmt.Errorf("mysql: id: %w", err)
	}
	return id, nil
}
