package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	return `SELECT ` + recordCols + ` FROM ` + table + ` FORCE INDEX (pending)
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

// runSQL lists, for each head the claim locked (heads[i], of key k and seq
// h), up to n pending rows after it in seq order, due or not, each as
// (i, seq, key): per head, a range of pending_keys (status, key, seq) from
// (pending, k, h) read in index order and cut off by LIMIT n, so a key
// with a deep backlog costs n entries, not its backlog. Like headsSQL it is
// a plain consistent read (the statement's snapshot S2, taken after the
// heads were locked) and locks nothing. The PAD SPACE collation makes
// `key` = k match the keys equal to k but for trailing spaces too, among
// k's rows in seq order: runs leaves their rows out (the list then holds
// fewer than n of k's rows), which keeps each range to n entries whatever
// those keys hold. Like lockHeadsSQL it names its values as literals, keys
// as hex strings introduced as utf8mb4 (no quoting to get wrong, whatever
// the key), and goes out as text.
func runSQL(table string, heads []seqRecord, n int) string {
	var b strings.Builder
	for i, h := range heads {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "(SELECT %d, seq, `key` FROM %s FORCE INDEX (pending_keys) WHERE status = %s"+
			" AND `key` = _utf8mb4 X'%x' AND seq > %d ORDER BY seq LIMIT %d)",
			i, table, statusPending, h.rec.Key, h.seq, n)
	}
	return b.String()
}

// lockRunSQL locks by primary key the rows runs chose (seqs) that are still
// pending and due at now, in seq order, with FOR UPDATE SKIP LOCKED, as
// lockHeadsSQL does the heads; runs keeps of each key only the unbroken run
// after its head. It goes out as text, like lockHeadsSQL.
func lockRunSQL(table string, seqs []uint64, now string) string {
	var b strings.Builder
	b.WriteString("SELECT seq, " + recordCols + " FROM " + table + " FORCE INDEX (PRIMARY) WHERE seq IN (")
	writeSeqs(&b, seqs)
	b.WriteString(") AND status = " + statusPending + " AND available_at <= '" + now + "' ORDER BY seq FOR UPDATE SKIP LOCKED")
	return b.String()
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
	return `SELECT ` + recordCols + ` FROM ` + table + ` AS t FORCE INDEX (pending)
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
func (s *Store) claimOrdered(ctx context.Context, tx *sql.Tx, now string, p stores.ClaimParams) ([]stores.Record, error) {
	limit := p.Limit // no cap on the walk: see maxRunKeys
	cursor := s.cursor.Get()
	want := headsPerClaim(limit)
	keys, seqs, err := s.heads(ctx, tx, false, cursor, "", want)
	if err != nil {
		return nil, err
	}
	next := "" // a short list ran to the last key: start again from the first
	if n := len(seqs); n == want {
		next = keys[n-1]
	} else if cursor != "" {
		k2, s2, err := s.heads(ctx, tx, true, "", cursor, want-n)
		if err != nil {
			return nil, err
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
			return nil, err
		}
	}
	runs := p.PerKey > 1 && len(heads) > 0
	var blank []stores.Record
	if room := p.Limit - len(heads); room > 0 {
		if blank, err = s.claimBlank(ctx, tx, now, sqlkit.UnkeyedRoom(room, runs)); err != nil {
			return nil, err
		}
	}
	keyed := heads
	if room := p.Limit - len(heads) - len(blank); runs && room > 0 {
		if keyed, err = s.runs(ctx, tx, now, heads, room, p.PerKey-1); err != nil {
			return nil, err
		}
	}
	recs := make([]stores.Record, 0, len(keyed)+len(blank))
	for _, r := range keyed {
		recs = append(recs, r.rec)
	}
	return append(recs, blank...), nil
}

// maxRunKeys is the most keys a claim lists runs for: it bounds runSQL's
// UNION ALL, whose cost is per branch (about 80 µs each on MariaDB 10.11).
// So, unlike PostgreSQL's and SQLite's stores, MySQL's does not cap the key
// walk to make room for runs (sqlkit.HeadLimit): a claim that finds many
// keys takes their heads, as it did before runs (measured, 1,000 keys:
// heads only ≈ 0.9 × unordered, a quarter cap with runs of 3 ≈ 0.5 ×).
const maxRunKeys = 64

// claimBlank claims up to n rows of the blank keys (blankClaimSQL), after
// a probe that there is any.
func (s *Store) claimBlank(ctx context.Context, tx *sql.Tx, now string, n int) ([]stores.Record, error) {
	var one int
	switch err := tx.QueryRowContext(ctx, s.blankProbeSQL).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return queryRecords(ctx, tx, s.blankClaimSQL, now, n)
}

// runs adds to the heads the claim locked (in seq order) the rows right
// after each, in its key's order: up to perKey rows of a key and room rows
// in all, shared fairly between the keys. It returns them all in seq order,
// so each key's rows come in the key's order. Two statements: runSQL lists
// the candidates, lockRunSQL locks them.
//
// Why this never takes a row out of turn. Take a key K whose head H (seq h)
// the claim locked: pending and due on its latest version, held until the
// batch ends, so no one changes it meanwhile (see lockHeadsSQL for why H is
// K's head). runSQL reads, in a snapshot S2 taken after that, K's first
// pending rows after H in seq order: R1, R2, … with seqs r1 < r2 < ….
//
//   - They are K's next rows. Every row of K with a seq below h is done
//     (lockHeadsSQL). A row of K with a seq between h and ri that runSQL
//     did not list is not pending in S2: published, dead or deleted, and
//     pending again only by Replay; it cannot be one S2 does not see yet,
//     since Ri is in S2 and writers of K take turns on the key-lock table,
//     so every row of K below ri committed before Ri did. Rows of K
//     committed after S2 have seqs above all of them.
//   - No other ordered claim takes them while this batch holds H. Another
//     claim lists K's head from its own snapshot: one that has H has it
//     pending (H has been pending since it committed, Replay aside, as in
//     lockHeadsSQL), so its head of K is H, which it skips (locked), or a
//     row below H, which fails its recheck; one older than H has no row
//     after H either (commit order). So it takes neither H nor a row after
//     it, and runs are only taken behind a head the claim holds: a batch
//     holds rows of K only while it holds K's head.
//   - lockRunSQL locks them by primary key with SKIP LOCKED and rechecks
//     each one's latest version: pending and due. Ri is kept only if it
//     and R1 … Ri-1 all passed: the run is unbroken. A row skipped (locked
//     by some other transaction: a DeadLetter, an unordered claim), no
//     longer pending (dead-lettered since S2) or not due ends the run;
//     rows after it that were locked stay locked, untouched, until the
//     batch ends, and are not in the batch.
//
// The claim never waits: runSQL does not lock, lockRunSQL skips. Each key's
// list is n entries of pending_keys at most (see runSQL): n is perKey,
// room, and twice the key's fair share of room, whichever is smallest, so
// the statement reads at most about twice room entries however deep the
// backlogs, and keys with short runs leave their share to the others (see
// share). Only the first maxRunKeys heads' keys are listed, and with
// little room only the first 2×room (and no more than maxStatementBytes of
// statement).
func (s *Store) runs(ctx context.Context, tx *sql.Tx, now string, heads []seqRecord, room, perKey int) ([]seqRecord, error) {
	listed := heads[:min(len(heads), 2*room, maxRunKeys)]
	size := 0
	for i, h := range listed { // a key's 1,020 bytes are 2,040 hex digits
		if size += 200 + 2*len(h.rec.Key); size > maxStatementBytes && i > 0 {
			listed = listed[:i]
			break
		}
	}
	n := min(perKey, room, (2*room+len(listed)-1)/len(listed))
	rows, err := tx.QueryContext(ctx, runSQL(s.table, listed, n))
	if err != nil {
		return nil, err
	}
	lists := make([][]uint64, len(listed)) // per head: its key's rows after it
	for rows.Next() {
		var (
			i   int
			seq uint64
			key string
		)
		if err := rows.Scan(&i, &seq, &key); err != nil {
			_ = rows.Close()
			return nil, err
		}
		if i < 0 || i >= len(listed) {
			_ = rows.Close()
			return nil, fmt.Errorf("runs: head %d of %d", i, len(listed))
		}
		if key == listed[i].rec.Key { // not a key equal to it but for trailing spaces
			lists[i] = append(lists[i], seq)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var chosen []uint64
	at := map[uint64][2]int{} // seq → head, place in its run
	for i, take := range share(lists, room) {
		l := lists[i]
		slices.Sort(l) // UNION ALL keeps each part's order in practice, not by contract
		for j, seq := range l[:take] {
			chosen = append(chosen, seq)
			at[seq] = [2]int{i, j}
		}
	}
	if len(chosen) == 0 {
		return heads, nil
	}
	slices.Sort(chosen)
	locked, err := querySeqRecords(ctx, tx, lockRunSQL(s.table, chosen, now))
	if err != nil {
		return nil, err
	}
	next := make([]int, len(listed)) // per head: the place in its run to take next
	out := heads
	for _, r := range locked { // in seq order, so each run's in its order
		p, ok := at[r.seq]
		if !ok {
			return nil, fmt.Errorf("runs: locked seq %d, not chosen", r.seq)
		}
		// A row is taken only right after the last one taken of its run:
		// once one is left out, none after it is.
		if i := p[0]; p[1] == next[i] {
			out = append(out, r)
			next[i]++
		}
	}
	slices.SortFunc(out, func(a, b seqRecord) int { return cmp.Compare(a.seq, b.seq) })
	return out, nil
}

// share says how many of each list's rows to take, room in all: as many of
// each as it has, up to an equal share of what the shorter ones leave.
func share(lists [][]uint64, room int) []int {
	take := make([]int, len(lists))
	open := 0 // lists with rows not taken yet
	for _, l := range lists {
		if len(l) > 0 {
			open++
		}
	}
	for room > 0 && open > 0 {
		each := room / open
		for i, l := range lists {
			if take[i] == len(l) || room == 0 {
				continue
			}
			g := min(max(each, 1), len(l)-take[i])
			take[i] += g
			room -= g
			if take[i] == len(l) {
				open--
			}
		}
	}
	return take
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
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, wrap("claim", err)
	}
	sess, err := s.session(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, wrap("claim", err)
	}
	b := &batch{s: s, conn: conn, sess: sess}
	if _, err := conn.ExecContext(ctx, sess.set); err != nil {
		b.release(ctx, true)
		return nil, wrap("claim", err)
	}
	// database/sql rolls a transaction back when its context ends; a claim
	// must last until Complete or Abort instead.
	b.tx, err = conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		b.release(ctx, false)
		return nil, wrap("claim", err)
	}
	if p.Unordered {
		b.recs, err = queryRecords(ctx, b.tx, s.claimSQL, dbTime(p.Now), p.Limit)
	} else {
		b.recs, err = s.claimOrdered(ctx, b.tx, dbTime(p.Now), p)
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

type batch struct {
	s    *Store
	conn *sql.Conn // nil once released
	tx   *sql.Tx   // nil once ended
	sess *session
	recs []stores.Record
}

func (b *batch) Records() []stores.Record { return b.recs }

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
	err := b.s.apply(ctx, tx, o)
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
// maxStatementRows records or maxStatementBytes of errors). Each names its
// rows as JSON_TABLE rows joined on the unique id (see sqlkit.IDsJSON).
func (s *Store) apply(ctx context.Context, tx *sql.Tx, o stores.Outcome) error {
	err := chunks(len(o.Published), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
		ids := sqlkit.IDsJSON(o.Published[lo:hi])
		var err error
		if o.DeletePublished {
			_, err = tx.ExecContext(ctx, `DELETE t FROM `+s.idRows, ids)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE `+s.idRows+` SET t.status = `+statusPublished+
				`, t.published_at = ?`, ids, dbTime(o.Now))
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
