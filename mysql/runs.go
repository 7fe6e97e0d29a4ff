package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// runEnd is a key and the seq of the last row of its run in a batch: where
// the run continues, in the same claim (after the key's head) or in a
// continuation of the batch (see batch.Continue).
type runEnd struct {
	key string
	seq uint64
}

// runSQL lists, for each of ends (key k, seq e), up to n pending rows of k
// after e in seq order, due or not, each as (i, seq, key), i being the
// end's place in ends: per end, a range of pending_keys (status, key, seq)
// from (pending, k, e) read in index order and cut off by LIMIT n, so a key
// with a deep backlog costs n entries, not its backlog. Like headsSQL it is
// a plain consistent read (the statement's snapshot) and locks nothing. The
// PAD SPACE collation makes `key` = k match the keys equal to k but for
// trailing spaces too, among k's rows in seq order: claimRuns leaves their
// rows out (the list then holds fewer than n of k's rows), which keeps each
// range to n entries whatever those keys hold. Like lockHeadsSQL it names
// its values as literals, keys as hex strings introduced as utf8mb4 (no
// quoting to get wrong, whatever the key), and goes out as text.
func runSQL(table string, ends []runEnd, n int) string {
	var b strings.Builder
	for i, e := range ends {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&b, "(SELECT %d, seq, `key` FROM %s FORCE INDEX (pending_keys) WHERE status = %s"+
			" AND `key` = _utf8mb4 X'%x' AND seq > %d ORDER BY seq LIMIT %d)",
			i, table, statusPending, e.key, e.seq, n)
	}
	return b.String()
}

// lockRunSQL locks by primary key the rows claimRuns chose (seqs) that are
// still pending and due at now, in seq order, with FOR UPDATE SKIP LOCKED,
// as lockHeadsSQL does the heads; claimRuns keeps of each key only the
// unbroken run. It goes out as text, like lockHeadsSQL.
func lockRunSQL(table string, seqs []uint64, now string) string {
	var b strings.Builder
	b.WriteString("SELECT seq, " + recordCols + " FROM " + table + " FORCE INDEX (PRIMARY) WHERE seq IN (")
	writeSeqs(&b, seqs)
	b.WriteString(") AND status = " + statusPending + " AND available_at <= '" + now + "' ORDER BY seq FOR UPDATE SKIP LOCKED")
	return b.String()
}

// maxRunKeys is the most keys a claim lists runs for, and minRun the run
// length a listed key is given room for at least (or the longest run
// ClaimParams.PerKey allows, if shorter): they bound runSQL's
// UNION ALL, whose cost is per branch (15 µs of MariaDB 10.11's CPU each
// on this machine, and 2 µs per row listed), so that a branch costs little
// next to the rows it brings. So, unlike PostgreSQL's and SQLite's stores,
// MySQL's does not cap the key walk to make room for runs
// (sqlkit.HeadLimit): a claim that finds many keys takes their heads, as
// it did before runs (measured, 1,000 keys: heads only ≈ 0.9 × unordered,
// a quarter cap with runs of 3 ≈ 0.5 ×). maxRunKeys is a quarter of the
// default batch, as PostgreSQL's HeadLimit, so a claim that finds up to a
// couple of hundred busy keys gives each a run and may be continued (see
// batch.Continue).
const (
	maxRunKeys = 256
	minRun     = 4
)

// runs adds to the heads the claim locked (in seq order) the rows right
// after each, in its key's order: up to perKey rows of a key and room rows
// in all, shared fairly between the keys (see claimRuns). It returns them
// all in seq order, so each key's rows come in the key's order, with the
// ends of the runs that took all they could, and whether every head's key
// was given its share: the batch may be continued (see batch.Continue)
// only then, as a continuation would follow some of the claim's keys and
// leave the others waiting behind the batch.
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
//     holds rows of K only while it holds K's head (or, for a
//     continuation, while the batch before it holds K's run up to the
//     continuation's first row: see batch.Continue).
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
// little room only as many as it gives minRun rows each (and no more than
// maxStatementBytes of statement).
func (s *Store) runs(ctx context.Context, tx *sql.Tx, now string, heads []seqRecord, room, perKey int) ([]seqRecord, []runEnd, bool, error) {
	listed := heads[:min(len(heads), max(room/min(minRun, perKey), 1), maxRunKeys)]
	size := 0
	for i, h := range listed { // a key's 1,020 bytes are 2,040 hex digits
		if size += 200 + 2*len(h.rec.Key); size > maxStatementBytes && i > 0 {
			listed = listed[:i]
			break
		}
	}
	ends := make([]runEnd, len(listed))
	for i, h := range listed {
		ends[i] = runEnd{key: h.rec.Key, seq: h.seq}
	}
	n := min(perKey, room, (2*room+len(listed)-1)/len(listed))
	rc, err := s.claimRuns(ctx, tx, now, ends, n, room)
	if err != nil {
		return nil, nil, false, err
	}
	out := append(heads, rc.rows...)
	slices.SortFunc(out, func(a, b seqRecord) int { return cmp.Compare(a.seq, b.seq) })
	return out, rc.full, len(listed) == len(heads) && !rc.starved, nil
}

// claimedRuns is what claimRuns took.
type claimedRuns struct {
	rows []seqRecord // the runs' rows, in seq order
	// full are the runs that took all they could — all n listed, or their
	// share of room when that was less — at their new ends: their keys
	// may have more rows. The others ran dry, or stopped at a row not
	// due or held elsewhere.
	full []runEnd
	// starved says that some key with rows listed got none: room ran out
	// before every key had its share.
	starved bool
}

// claimRuns claims, for each of ends (a key k and the seq e its run in
// the batch ends at), the rows of k right after e: up to n of each and
// room in all, shared fairly (see share). Two statements: runSQL lists
// the candidates, lockRunSQL locks them; of each key it keeps the unbroken
// run, the rows right after e with none left out. See runs and
// batch.Continue for why these are each key's next rows, which no other
// batch takes.
func (s *Store) claimRuns(ctx context.Context, tx *sql.Tx, now string, ends []runEnd, n, room int) (claimedRuns, error) {
	var out claimedRuns
	rows, err := tx.QueryContext(ctx, runSQL(s.table, ends, n))
	if err != nil {
		return out, err
	}
	lists := make([][]uint64, len(ends)) // per end: its key's rows after it
	others := make([]bool, len(ends))    // per end: rows of keys equal to its but for trailing spaces were listed
	for rows.Next() {
		var (
			i   int
			seq uint64
			key string
		)
		if err := rows.Scan(&i, &seq, &key); err != nil {
			_ = rows.Close()
			return out, err
		}
		if i < 0 || i >= len(ends) {
			_ = rows.Close()
			return out, fmt.Errorf("runs: key %d of %d", i, len(ends))
		}
		if key == ends[i].key {
			lists[i] = append(lists[i], seq)
		} else {
			others[i] = true
		}
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	var chosen []uint64
	at := map[uint64][2]int{} // seq → end, place in its run
	take := share(lists, room)
	for i, t := range take {
		l := lists[i]
		slices.Sort(l) // UNION ALL keeps each part's order in practice, not by contract
		for j, seq := range l[:t] {
			chosen = append(chosen, seq)
			at[seq] = [2]int{i, j}
		}
		out.starved = out.starved || t == 0 && len(l) > 0
	}
	if len(chosen) == 0 {
		return out, nil
	}
	slices.Sort(chosen)
	locked, err := querySeqRecords(ctx, tx, lockRunSQL(s.table, chosen, now))
	if err != nil {
		return out, err
	}
	next := make([]int, len(ends)) // per end: the place in its run to take next
	last := make([]uint64, len(ends))
	for _, r := range locked { // in seq order, so each run's in its order
		p, ok := at[r.seq]
		if !ok {
			return out, fmt.Errorf("runs: locked seq %d, not chosen", r.seq)
		}
		// A row is taken only right after the last one taken of its run:
		// once one is left out, none after it is.
		if i := p[0]; p[1] == next[i] {
			out.rows = append(out.rows, r)
			next[i]++
			last[i] = r.seq
		}
	}
	for i, t := range take {
		// Full: every row chosen was taken, and the list had more, or was
		// as long as asked for. A key whose list held rows of its
		// trailing-space twins is left out: its list says less.
		if t > 0 && next[i] == t && !others[i] && (t < len(lists[i]) || len(lists[i]) == n) {
			out.full = append(out.full, runEnd{key: ends[i].key, seq: last[i]})
		}
	}
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
