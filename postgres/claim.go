package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/internal/headerjson"
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
// of turn, and with p.PerKey at most a quarter of p.Limit keys at first,
// a hundredth with p.Pipelined (see sqlkit.HeadLimit). Keys are visited
// round-robin from where the last claim stopped, so no key starves.
// Unkeyed rows take up to half the room the heads left (all of it without
// p.PerKey), by due time — with
// p.PerKey, half of what the most heads leave in the walk's round trip,
// and the rest of their share after it only if that much was found; then, with
// p.PerKey, the rest goes to the runs after the heads claimed — the first
// event of each in the walk's own statement (see keyedSQL), the rest of
// the runs of keys that have more after it (see runsSQL), shared evenly
// among their keys: a claim that finds few keys
// takes long runs of each, one that finds many takes their heads, and one
// whose keys are too shallow to fill the batch reads on along the index
// for more (see claim and rangeSQL). With p.Unordered, every due row of each key is claimable (see
// keyedUnorderedSQL), still walking keys round-robin. Each part runs along
// an index of pending rows only.
//
// The rows of runs and ranges are locked as the index finds them, and one
// that another transaction holds makes the claim start again, ranking
// its rows instead (see runLocking).
//
// Every statement of the claim is planned once per connection, and its
// plan suits any state of the table: see plannerSettings.
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	b, err := attempt(s, true, func(locking runLocking) (*batch, error) { return s.claimIn(ctx, p, locking) })
	if err != nil {
		return nil, err
	}
	return b, nil
}

// claimIn is one attempt at Claim, in a transaction of its own, its runs
// locked as locking says.
func (s *Store) claimIn(ctx context.Context, p stores.ClaimParams, locking runLocking) (*batch, error) {
	b, err := s.begin(ctx)
	if err != nil {
		return nil, wrap("claim", err)
	}
	if err := s.claim(ctx, b.tx, p, b, locking); err != nil {
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

// runLocking is how a claim locks the rows of the runs behind the heads it
// holds, and the rows of the range it reads on along the index when its
// keys are shallow (see rangeSQL).
//
// In normal operation nobody else holds such a row: no ordered claim takes
// a row of a key without holding the key's head, and a relay's range
// starts after the keys its other workers hold (see claim). So lockInOrder
// locks the rows where the (key, seq) index finds them, in order, with
// NOWAIT: one visit to each row, as the unordered claim pays. A few
// transactions may hold such rows all the same: a continuation that
// outlives its aborted batch (see Continue), a range's locks on rows it
// read and left out (a key whose head was not due, say), another relay
// process walking the same keys from a cursor of its own, a relay in
// unordered mode. Skipping the row would take the ones after it out of
// turn; NOWAIT fails the statement instead (lock_not_available), and the
// claim starts again, in a fresh transaction, with lockRanked: each row's
// rank in its key in the statement's snapshot, read before any row is
// locked, then the rows locked by ctid with SKIP LOCKED, and keepRuns ends
// each run at the first rank missing. That costs a second visit to each
// row: over 1,000 keys, 7.6 to 8.6 µs of the database's CPU per event
// claimed and completed against 3.7 to 4.3 locked in order (2.6 to 2.7
// unordered), and over 100,000 keys, where ranges do most of the work,
// 7.2 to 7.6 against 2.55 (2.2 to 2.3); BenchmarkBacklogClaim.
//
// After a claim's statement has met such a row, the store's claims and
// continuations rank for rankedSpell: relays in several processes over
// the same keys pay for ranked claims, not for a failed statement and a
// ranked one each time. A continuation that met one does not start the
// spell (see attempt).
//
// A row changed since the statement's snapshot by a transaction that has
// committed since is checked again as it is now, and passed over when no
// longer pending or gone: only one of those other holders can have done
// that, and a ranked statement whose snapshot came a moment later would
// pass over it too.
type runLocking bool

const (
	lockInOrder runLocking = false
	lockRanked  runLocking = true
)

// rankedSpell is how long a store ranks runs after a statement met a row
// another transaction held (see runLocking).
const rankedSpell = time.Second

// runLocking returns how the store's claims lock runs now.
func (s *Store) runLocking() runLocking {
	if time.Now().UnixNano() < s.rankedUntil.Load() {
		return lockRanked
	}
	return lockInOrder
}

// attempt runs try with the store's run locking now, and once more with
// lockRanked when its rows locked in order met one another transaction
// held. When a claim met one (spell), the store's claims then rank for
// rankedSpell. A continuation's does not start the spell: its rows meet
// another's in one process too, when a fresh claim took the key's next
// rows after the continuation's batch completed — a race of the moment,
// which the ranked retry settles — and a spell would then rank every
// claim of the store for a second (a drain over ten keys: 95 claims of
// 121 ranked, after one such continuation).
func attempt[T any](s *Store, spell bool, try func(runLocking) (T, error)) (T, error) {
	if s.runLocking() == lockRanked {
		return try(lockRanked)
	}
	v, err := try(lockInOrder)
	if isLockNotAvailable(err) {
		if spell {
			s.rankedUntil.Store(time.Now().Add(rankedSpell).UnixNano())
		}
		v, err = try(lockRanked)
	}
	return v, err
}

// claimSettingsSQL sets, for the claim's transaction only, the claim
// timeout ($1, in ms) and the planner settings its statements are planned
// with (see plannerSettings). The calls' results are concatenated into one
// column, which nothing reads: PostgreSQL sets up each output column of a
// statement at every execution.
const claimSettingsSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true) || ` + plannerSettings

// plannerSettings makes the claim's statements (and the completion's)
// cheap to plan and safe to plan once: each is planned once per
// connection for any table (plan_cache_mode = force_generic_plan), and
// the only plans left to the planner are the ones it would make for a
// large backlog.
//
// A plan made once must suit every state of the table: nearly empty, as
// when a relay claims on every commit, and a backlog of millions. So every
// claim statement is written so that each row it reads comes from an index
// range that a parameter bounds: the keyed walk steps from key to key, and
// every other read of the table is a LATERAL subquery with its own row lock
// (which PostgreSQL never flattens into a join), so the planner has no join
// order to choose. What is left to choose, the access path, is pinned by
// switching off every path that reads what no parameter bounds: sequential
// and bitmap scans, and the sorts, hash and merge joins that would feed
// them. PostgreSQL still takes a disabled path where nothing else exists;
// TestClaimGenericPlans checks that none does here, on an empty table and
// on a backlog that statistics have not caught up with.
//
// Why not plan afresh: planning the claim took about 0.7 ms (1 to 3 µs of
// the database's CPU per event at full batches, most of a claim's cost at
// a trickle). Why not let PostgreSQL choose (plan_cache_mode = auto): after
// five executions it may keep a generic plan for the table as it was then,
// and an earlier version of these statements, with joins the planner could
// reorder, got one made for a nearly empty table (a sequential scan with
// every key's head looked up again for each row) that then cost seconds a
// claim once a backlog built up (TestClaimAfterBacklogGrows). And with no
// sort, a burst into a table whose statistics are behind cannot make a
// claim sort the backlog (TestClaimPlansWithoutStatistics).
//
// JIT compilation is off: a generic plan's estimates for a large table can
// pass jit_above_cost, and PostgreSQL then compiles the statement at every
// execution (LLVM, about 10 ms), never keeping the code. A draft of the
// key walk that did cost 30 µs of the database's CPU per event for it.
//
// The settings last until the transaction ends, so RunInTx puts them back
// to the session's own for the in-process handlers' statements.
const plannerSettings = `set_config('plan_cache_mode', 'force_generic_plan', true) ||
	set_config('enable_seqscan', 'off', true) || set_config('enable_bitmapscan', 'off', true) ||
	set_config('enable_sort', 'off', true) || set_config('enable_hashjoin', 'off', true) ||
	set_config('enable_mergejoin', 'off', true) || set_config('enable_memoize', 'off', true) || set_config('jit', 'off', true)`

// handlerSettingsSQL puts back, for the statements of in-process handlers
// run in a claim's transaction (RunInTx), the session's own planner
// settings; claimPlannerSQL sets the claim's again.
const (
	handlerSettingsSQL = `SET LOCAL plan_cache_mode TO DEFAULT; SET LOCAL enable_seqscan TO DEFAULT;
	SET LOCAL enable_bitmapscan TO DEFAULT; SET LOCAL enable_sort TO DEFAULT; SET LOCAL enable_hashjoin TO DEFAULT;
	SET LOCAL enable_mergejoin TO DEFAULT; SET LOCAL enable_memoize TO DEFAULT; SET LOCAL jit TO DEFAULT`
	claimPlannerSQL = `SELECT ` + plannerSettings
)

func (s *Store) claim(ctx context.Context, tx querier, p stores.ClaimParams, b *batch, locking runLocking) (err error) {
	now := p.Now.UTC()
	timeout := strconv.FormatInt(s.cfg.ClaimTimeout.Milliseconds(), 10)
	if p.Unordered {
		return s.claimUnordered(ctx, tx, p, b, timeout)
	}
	unkeyedRows := newRowScanner(withSeq) // holds the last unkeyed row claimed
	addUnkeyed := b.adder(unkeyedRows)

	// The heads of keys, from the cursor on and around; unkeyed rows, in
	// the same round trip when runs leave them room whatever the walk
	// finds; then the runs after the heads: each step only if the batch is
	// not full.
	//
	// The claim holds s.walking until it has moved the cursor past what it
	// took: a second worker of the relay starting from the same cursor
	// meanwhile would walk the same keys, find every head held and walk on
	// past them, which in a 200,000-event drain over 100,000 keys cost the
	// database about as much as the claims themselves.
	s.walking.Lock()
	defer s.walking.Unlock()
	cursor := s.cursor.Get()
	defer func() {
		if isLockNotAvailable(err) {
			s.cursor.Set(cursor) // the claim starts again from the same key
		}
	}()
	limit := sqlkit.HeadLimit(p.Limit, p.PerKey, p.Pipelined)
	// With runs, the unkeyed rows' share is at least half of what the most
	// heads leave, so that much is claimed alongside the walk, and so is
	// the first run of each head (see keyedSQL) as long as the most heads'
	// runs fit beside that: a claim at a trickle takes one round trip, not
	// three.
	early, first := 0, 0
	if p.PerKey > 1 {
		early = sqlkit.UnkeyedRoom(p.Limit-limit, true)
		first = min(p.PerKey-1, (p.Limit-limit-early)/limit)
	}
	// With lockInOrder, the first runs lock one row more when the key's
	// runs may go on in this claim: whether there is one says whether the
	// key has more (see keyedSQL). Without it, a full first run may have.
	probe := first
	if locking == lockInOrder && first < p.PerKey-1 {
		probe++
	}
	var pb pgx.Batch
	off := b.opening(&pb)
	pb.Queue(claimSettingsSQL, timeout)
	if first > 0 {
		pb.Queue(s.keyedSQL(true, locking, cursor == ""), now, limit, cursor, probe)
	} else {
		pb.Queue(s.keyedSQL(false, locking, cursor == ""), now, limit, cursor)
	}
	if early > 0 {
		pb.Queue(s.unkeyedSQL(false), now, early)
	}
	var heads []numbered  // the heads claimed, their seqs, and which walk found them
	var firsts []numbered // the rows of their first runs, ranked after their heads
	numbers := newRowScanner(withRank)
	if first > 0 {
		numbers = newRowScanner(withMore)
	}
	ranks := ranker(locking)
	more := map[string]bool{} // the keys that may have rows after their first runs
	err = run(ctx, tx, &pb, off+1, func(q int, r pgx.Rows) error {
		if q == off+2 {
			return addUnkeyed(q, r)
		}
		x, err := numbers.scan(r)
		if x.rank > 0 {
			ranks(&x)
			if x.more || locking == lockInOrder && x.rank == int64(probe) {
				more[x.rec.Key] = true
			}
			if x.rank <= int64(first) {
				firsts = append(firsts, x)
			}
			return err
		}
		b.add(&x)
		heads = append(heads, x)
		return err
	})
	if err != nil {
		return err
	}
	got := len(b.recs) - len(heads) // unkeyed rows claimed
	// The second walk ran: the batch has wrapped around the cursor.
	wrapped := cursor != "" && len(heads) < limit
	for _, h := range heads {
		wrapped = wrapped || h.rank < 0
	}
	walkFull := len(heads) == limit
	s.cursor.Advance(cursor, walkFull, recordKeys(b.recs[:len(heads)]))
	runs := len(heads) > 0 && p.PerKey > 1
	ends := headEnds(heads)
	at := make(map[string]int, len(ends))
	for i, e := range ends {
		at[e.key] = i
	}
	firsts = keepRuns(firsts, at, p.Now)
	// The unkeyed rows' whole share, as if claimed after the walk: more
	// when the walk took fewer heads than it could, all the room without
	// runs (and never past the batch's limit with the first runs). The
	// rows already claimed are passed over by their place in the index:
	// SKIP LOCKED skips only the rows other transactions hold.
	share := min(sqlkit.UnkeyedRoom(p.Limit-len(heads), runs), p.Limit-len(heads)-len(firsts))
	if share > got && (early == 0 || got == early) {
		var pb pgx.Batch
		if got == 0 {
			pb.Queue(s.unkeyedSQL(false), now, share)
		} else {
			last := &unkeyedRows.x
			pb.Queue(s.unkeyedSQL(true), now, share-got, last.available, last.n)
		}
		if err := run(ctx, tx, &pb, 0, addUnkeyed); err != nil {
			return err
		}
	}
	if !runs {
		return nil
	}
	// The first runs, then the rest of the runs of the keys whose first
	// run came full (the others have no more rows due and free).
	taken := b.addRuns(firsts, ends, at)
	full := ends[:0]
	for i, e := range ends {
		if first == 0 || taken[i] == first && more[e.key] {
			full = append(full, e)
		}
	}
	ends = full
	room := p.Limit - len(b.recs)
	if room <= 0 {
		return nil
	}
	// The walk took as many heads as it could: it may have taken the last
	// key with pending rows, and then it reached them all. Whether it did
	// matters only when runs come full (see below); the probe rides in
	// the runs' round trip.
	var beyond *keysProbe
	if walkFull {
		beyond = &keysProbe{last: heads[len(heads)-1].rec.Key, cursor: cursor, wrapped: wrapped}
	}
	if per := sqlkit.RunLength(room, max(1, len(ends)), p.PerKey-first); len(ends) > 0 && per > 0 {
		if ends, err = s.claimRuns(ctx, tx, p.Now, b, ends, per, room, locking, beyond); err != nil {
			return err
		}
	}
	if walkFull && len(ends) > 0 {
		if beyond.done {
			walkFull = beyond.more
		} else if walkFull, err = s.keysBeyond(ctx, tx, beyond.last, beyond.cursor, beyond.wrapped); err != nil {
			return err
		}
	}
	if !walkFull {
		// Every key due and free was reached: the batch may be continued
		// (see Continue).
		b.ends, b.continuable = ends, len(ends) > 0
		return nil
	}
	// The walk stopped at its limit and the runs behind its heads left
	// room: many keys of a few events each. Rather than walk on key by
	// key, read on along the index from the last key taken (never over a
	// key this batch holds: locking a row it already holds would take it
	// twice), every key's rows in one range (see rangeSQL).
	after := heads[len(heads)-1].rec.Key
	for scans := 0; scans < maxScans; scans++ {
		room := p.Limit - len(b.recs)
		if room <= 0 {
			break
		}
		last, read, err := s.claimRange(ctx, tx, p.Now, b, wrapped, room, min(p.PerKey, room), after, cursor, locking)
		if err != nil {
			return err
		}
		if last == "" {
			break // nothing after after
		}
		after = last
		s.cursor.Advance(cursor, read == int64(room), recordKeys(b.recs))
		if read < int64(room) {
			break // the range reached the last key
		}
	}
	return nil
}

// claimUnordered is claim with p.Unordered: every due row of each key,
// from the cursor to the last key, then from the first key up to the
// cursor, then unkeyed rows; each step only if the batch is not full.
func (s *Store) claimUnordered(ctx context.Context, tx querier, p stores.ClaimParams, b *batch, timeout string) error {
	now := p.Now.UTC()
	each := b.adder(newRowScanner(recordOnly))
	cursor := s.cursor.Get()
	var pb pgx.Batch
	off := b.opening(&pb)
	pb.Queue(claimSettingsSQL, timeout)
	pb.Queue(s.keyedUnorderedSQL(false), now, p.Limit, cursor)
	if err := run(ctx, tx, &pb, off+1, each); err != nil {
		return err
	}
	if len(b.recs) < p.Limit && cursor != "" {
		var pb pgx.Batch
		pb.Queue(s.keyedUnorderedSQL(true), now, p.Limit-len(b.recs), "", cursor)
		if err := run(ctx, tx, &pb, 0, each); err != nil {
			return err
		}
	}
	s.cursor.Advance(cursor, len(b.recs) == p.Limit, recordKeys(b.recs))
	if room := p.Limit - len(b.recs); room > 0 {
		var pb pgx.Batch
		pb.Queue(s.unkeyedSQL(false), now, room)
		return run(ctx, tx, &pb, 0, b.adder(newRowScanner(withSeq)))
	}
	return nil
}

// maxScans bounds the range scans of one ordered claim (see claim).
const maxScans = 3

// claimRange adds to b, of the first n index entries of pending keyed rows
// after key after (and up to upTo, when bounded), each key's unbroken run
// from its head, at most per rows of each (see rangeSQL and keepRuns). It
// returns the last key it read and how many entries it read; none when it
// took nothing (its keys' heads held by others, say), and the range then
// ends.
func (s *Store) claimRange(ctx context.Context, tx querier, now time.Time, b *batch, bounded bool, n, per int, after, upTo string, locking runLocking) (last string, read int64, err error) {
	args := []any{now.UTC(), n, after, per}
	if locking == lockInOrder {
		args = []any{n, after}
	}
	if bounded {
		args = append(args, upTo)
	}
	var pb pgx.Batch
	pb.Queue(s.rangeSQL(bounded, locking), args...)
	sc := newRowScanner(withRank)
	if locking == lockRanked {
		sc.dst = append(sc.dst, &last, &read)
	}
	ranks := ranker(locking)
	var rows []numbered
	at := map[string]int{}
	if err := run(ctx, tx, &pb, 0, func(_ int, r pgx.Rows) error {
		x, err := sc.scan(r)
		if _, ok := at[x.rec.Key]; !ok {
			at[x.rec.Key] = len(at)
		}
		ranks(&x)
		if locking == lockInOrder {
			last, read = x.rec.Key, read+1
			if x.rank > int64(per) {
				return err // locked, left out
			}
		}
		rows = append(rows, x)
		return err
	}); err != nil {
		return "", 0, err
	}
	held := make(map[string]bool, len(b.recs))
	for i := range b.recs {
		held[b.recs[i].Key] = true
	}
	for _, x := range keepRuns(rows, at, now) {
		if held[x.rec.Key] {
			return "", 0, fmt.Errorf("the range came back to key %q, whose rows this claim holds", x.rec.Key)
		}
		b.add(&x)
	}
	return last, read, nil
}

// keysBeyond reports whether a key the ordered claim's walk did not reach
// has pending rows: a key after last, the walk's last head, that is not
// after cursor, where the walk started, once the walk has wrapped around
// to the first key, and otherwise any key after last or up to cursor. A
// key another batch holds, or whose head is not due, counts: so the
// answer may be yes when no key is free, never no when one is.
func (s *Store) keysBeyond(ctx context.Context, tx querier, last, cursor string, wrapped bool) (bool, error) {
	var more bool
	err := tx.QueryRow(ctx, s.keysBeyondSQL(wrapped), last, cursor).Scan(&more)
	return more, err
}

// keysProbe is keysBeyond asked in the round trip of another statement
// (claimRuns): its arguments, and once asked (done), its answer.
type keysProbe struct {
	last, cursor string
	wrapped      bool
	done, more   bool
}

// keysBeyondSQL is keysBeyond's statement: whether a pending keyed row has
// a key after $1 and up to $2 (wrapped), or after $1 or up to $2; one
// probe of the (key, seq) index each.
func (s *Store) keysBeyondSQL(wrapped bool) string {
	t := s.nm.table
	if wrapped {
		return `SELECT EXISTS (SELECT FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $1 AND key <= $2)`
	}
	return `SELECT EXISTS (SELECT FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $1)
		OR EXISTS (SELECT FROM ` + t + ` WHERE status = 0 AND key <> '' AND key <= $2)`
}

// headEnds returns the run ends of heads: each its key and seq.
func headEnds(heads []numbered) []runEnd {
	ends := make([]runEnd, len(heads))
	for i, h := range heads {
		ends[i] = runEnd{key: h.rec.Key, seq: h.n}
	}
	return ends
}

// runEnd is the last row of a key's run in a batch: where a continuation
// of the batch starts (see runsSQL).
type runEnd struct {
	key string
	seq int64
}

// claimRuns adds to b up to room rows, the runs after ends, at most per
// of each key (see runsSQL), and returns the ends of the runs that took
// all per rows, moved to their new last rows: the other keys have no more
// rows due and free, or rows this batch locked and left out (the room ran
// out, or one was not due), so nothing to continue. With beyond, it asks
// keysBeyond's question after the runs' statement, in the same round trip.
func (s *Store) claimRuns(ctx context.Context, tx querier, now time.Time, b *batch, ends []runEnd, per, room int, locking runLocking, beyond *keysProbe) ([]runEnd, error) {
	keys := make([]string, len(ends))
	seqs := make([]int64, len(ends))
	at := make(map[string]int, len(ends))
	for i, e := range ends {
		keys[i], seqs[i], at[e.key] = e.key, e.seq, i
	}
	var pb pgx.Batch
	pb.Queue(s.runsSQL(locking), keys, seqs, per)
	if beyond != nil {
		pb.Queue(s.keysBeyondSQL(beyond.wrapped), beyond.last, beyond.cursor)
	}
	rows := make([]numbered, 0, min(len(ends)*per, room+per))
	sc := newRowScanner(withRank)
	ranks := ranker(locking)
	err := run(ctx, tx, &pb, 0, func(q int, r pgx.Rows) error {
		if q == 1 {
			beyond.done = true
			return r.Scan(&beyond.more)
		}
		x, err := sc.scan(r)
		ranks(&x)
		rows = append(rows, x)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The last key's run may be cut short: still a run. The rows left out
	// stay locked, untouched, until the batch ends.
	kept := keepRuns(rows, at, now)
	taken := b.addRuns(kept[:min(len(kept), room)], ends, at)
	full := ends[:0]
	for i, e := range ends {
		if taken[i] == per {
			full = append(full, e)
		}
	}
	return full, nil
}

// addRuns adds to b the rows of runs, kept by keepRuns, moves each key's
// end (at its index in at) to its last row added, and returns how many
// rows each key took.
func (b *batch) addRuns(runs []numbered, ends []runEnd, at map[string]int) []int {
	taken := make([]int, len(ends))
	for _, x := range runs {
		b.add(&x)
		i := at[x.rec.Key]
		ends[i].seq = x.n
		taken[i]++
	}
	return taken
}

// ranker returns what sets the rank of each row of a run, in the order a
// statement returns them: with lockRanked the statement's own, with
// lockInOrder the row's place among its key's rows (1 for the first), as
// the statement returns each key's rows in seq order with none between
// them passed over (see runLocking).
func ranker(locking runLocking) func(x *numbered) {
	if locking == lockRanked {
		return func(*numbered) {}
	}
	seen := map[string]int64{}
	return func(x *numbered) {
		seen[x.rec.Key]++
		x.rank = seen[x.rec.Key]
	}
}

// run sends pb and calls each for every row of every query in it but the
// first skip (BEGIN, settings), with the query's index in pb.
func run(ctx context.Context, tx querier, pb *pgx.Batch, skip int, each func(q int, r pgx.Rows) error) error {
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
		for rows.Next() {
			if err := each(i, rows); err != nil {
				rows.Close()
				_ = br.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
}

// numbered is a row of keyedSQL or runsSQL: a record, its due time and its
// seq.
type numbered struct {
	rec       stores.Record
	available time.Time
	tid       pgtype.TID // the row's ctid
	n         int64      // seq
	rank      int64      // runsSQL: the row's rank after its key's head
	more      bool       // keyedSQL with runs: its key has rows after its first run
}

// The columns a rowScanner reads: recordCols and the row's ctid, then the
// seq, then a run's rank, then whether its key has more rows.
const (
	recordOnly = iota
	withSeq
	withRank
	withMore
)

// rowScanner scans the rows of a claim's statements into one value it
// reuses: pgx takes a row's destinations as a []any, and a list made for
// each row was an allocation per claimed event.
type rowScanner struct {
	x   numbered
	dst []any
}

func newRowScanner(cols int) *rowScanner {
	s := &rowScanner{}
	x := &s.x
	s.dst = []any{uuidDst(&x.rec.ID), &x.rec.Topic, &x.rec.Key, &x.rec.Type, &x.rec.Payload, headerjson.Column(&x.rec.Headers),
		&x.rec.CreatedAt, &x.available, &x.rec.Attempts, &x.rec.LastError, &x.tid, &x.n, &x.rank, &x.more}[:11+cols]
	return s
}

// scan reads the current row of r. Every field starts from its zero value:
// the headers are decoded into a map they are given, and a record's
// NotBefore is set only for some rows.
func (s *rowScanner) scan(r pgx.Rows) (numbered, error) {
	s.x = numbered{}
	err := r.Scan(s.dst...)
	setNotBefore(&s.x.rec, s.x.available)
	return s.x, err
}

// keepRuns keeps, of the rows runsSQL locked, each key's unbroken run:
// ranks 1, 2, 3 … up to the first one missing (a row another batch holds,
// or one gone since the snapshot) or not due at now; the rows after it
// must wait. Keys come in at's order, each's rows in rank order.
func keepRuns(rows []numbered, at map[string]int, now time.Time) []numbered {
	slices.SortFunc(rows, func(a, b numbered) int {
		return cmp.Or(cmp.Compare(at[a.rec.Key], at[b.rec.Key]), cmp.Compare(a.rank, b.rank))
	})
	out := rows[:0]
	var key string
	var want int64
	for i, x := range rows {
		if i == 0 || x.rec.Key != key {
			key, want = x.rec.Key, 1
		}
		if x.rank != want || x.available.After(now) {
			want = -1 // broken: nothing more of this key
			continue
		}
		out = append(out, x)
		want++
	}
	return out
}

// keyedSQL claims the heads of keys, visiting keys in order from $3
// (exclusive) to the last one, then from the first up to $3 (inclusive),
// and returns after each head's columns its seq and which walk found it (0
// the first, -1 the second). A recursive CTE skips
// from key to key along the (key, seq) index of pending keyed rows, one
// probe per key: the first entry after key k is the next key's lowest
// seq, its head. So the cost is per key visited, not per pending row; the
// query stops as soon as $2 heads are locked, and the second walk, from
// the first key, runs only if the first one ran out of keys first (a
// LIMIT over UNION ALL reads its branches in turn, as far as it needs):
// one round trip, where a claim that wrapped around used to take two.
// Each head is locked where the walk found it (its ctid), without a
// second probe of an index.
//
// A head is locked with SKIP LOCKED: a head another batch holds is in
// flight, and its key is passed over. A later row of that key is never a
// candidate, because the head is computed from this statement's snapshot,
// in which the held head is still pending. When the holder has completed
// the head meanwhile, locking the now-changed row re-checks it (status,
// due time) against its latest version, so a head that was published,
// deleted or rescheduled is not taken either.
//
// With runs, the statement also claims each locked head's first run: up
// to $4 of the key's pending rows right after it, locked as runsSQL locks
// them, so that a claim of a few events — a trickle, where a key rarely
// has a second one — is one round trip, not two. The runs' statement
// (claimRuns) follows only for keys whose first run came full with more
// rows behind it: with lockRanked, the first run's rows are ranked 1, 2 …
// as runsSQL ranks them, and each ends with whether its key has more in
// the statement's snapshot (one more index entry read); with lockInOrder,
// each is ranked 1 (ranker numbers them) and false, and $4 is one more
// than the first run's length when the key's runs may go on in the same
// claim: a row past the first run says that the key has more, and the
// claim leaves it out, locked, for the key's next run to start there (in
// the claim's own transaction: a continuation, in another, would find it
// held). Otherwise a full first run may have more.
//
// With fromStart ($3 the empty key: the cursor is at the start, as it is
// after every claim whose walk was not full, so at every claim at a
// trickle) there is nothing to wrap around to, and the statement has the
// first walk only: the second's nodes cost PostgreSQL about a fifth of a
// trickle's claim to set up at every execution, whether they run or not.
// The parameters are the same.
func (s *Store) keyedSQL(runs bool, locking runLocking, fromStart bool) string {
	t := s.nm.table
	walk := func(name, lower, upper string) string {
		return name + `(key, tid) AS (
		(SELECT key, ctid FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > ` + lower + upper + ` ORDER BY key, seq LIMIT 1)
		UNION ALL
		SELECT n.key, n.ctid FROM ` + name + ` k CROSS JOIN LATERAL (
			SELECT n.key, n.ctid FROM ` + t + ` n WHERE n.status = 0 AND n.key <> '' AND n.key > k.key` + upper + `
			ORDER BY n.key, n.seq LIMIT 1) n
	)`
	}
	heads := func(walk, second string) string {
		return `(SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, ` + second + `::bigint FROM ` + walk + ` k
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m WHERE m.ctid = k.tid AND m.status = 0 AND m.available_at <= $1
		FOR UPDATE SKIP LOCKED) m)`
	}
	walks, both := `WITH RECURSIVE `+walk("after", "$3", ""), heads("after", "0")
	if !fromStart {
		walks += `, ` + walk("upto", "''", " AND key <= $3")
		both += ` UNION ALL ` + heads("upto", "-1")
	}
	if !runs {
		return walks + `
	` + both + `
	LIMIT $2`
	}
	firsts := `SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, 1::bigint, false FROM h
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m
		WHERE ` + rowsAfter("m", "h.key", "h.seq") + ` LIMIT $4 FOR UPDATE NOWAIT) m`
	if locking == lockRanked {
		firsts = `SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, run.rank, run.found > $4 FROM h
	CROSS JOIN LATERAL (SELECT tid, rank, count(*) OVER () AS found FROM (
		SELECT r.ctid AS tid, row_number() OVER (ORDER BY r.key, r.seq) AS rank FROM ` + t + ` r
		WHERE ` + rowsAfter("r", "h.key", "h.seq") + ` LIMIT $4 + 1) r) run
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m WHERE m.ctid = run.tid AND run.rank <= $4 AND m.status = 0
		FOR UPDATE SKIP LOCKED) m`
	}
	return walks + `, h(id, topic, key, type, payload, headers, created_at, available_at, attempts, last_error, rowid, seq, rank) AS MATERIALIZED (
	` + both + `
	LIMIT $2)
	SELECT *, false FROM h
	UNION ALL
	` + firsts
}

// rangeSQL claims, of the first $2 index entries of pending keyed rows
// after key $3 (exclusive, and up to the last parameter, inclusive, when
// bounded), each key's first rows, with their rank in their key (1 for
// its head) in the statement's snapshot; keepRuns keeps each key's
// unbroken run from its head, which must be due. One range of the (key,
// seq) index serves every key, so it suits many keys of a few rows each,
// where the key walk (keyedSQL) pays a probe per key; a deep key costs it
// its every entry up to $2.
//
// The range starts at a key's first entry (after key $3), so the first
// row of each key it reads is the key's head in the snapshot, and ranks
// count from there.
//
// With lockInOrder ($1 the entries, $2 the key after which they start),
// each row is locked where the range finds it, NOWAIT, with its seq and
// rank 0 (ranker numbers them): a row another transaction holds — a head
// another batch took, say — fails the statement, so the first row of each
// key is its head and no row is passed over (see runLocking). The rows
// past a key's $4 first, or after a row not due, stay locked, untouched,
// until the batch ends; claimRange counts what the range read and its last
// key itself.
//
// With lockRanked ($1 the time the heads must be due by, $2 the entries,
// $3 the key after which they start, $4 the rows of each key at most),
// the rows are ranked first, and each of a key's first $4 is then locked
// where the range found it (its ctid) with SKIP LOCKED; a head another
// batch holds is missing, and keepRuns passes over its key, so no row is
// taken out of turn — the same argument as runsSQL's, with the head taken
// here too. Every row also carries the last key the range read and how
// many entries it read, for the next range to start after it.
func (s *Store) rangeSQL(bounded bool, locking runLocking) string {
	t := s.nm.table
	if locking == lockInOrder {
		upper := ""
		if bounded {
			upper = " AND key <= $3"
		}
		return `SELECT ` + recordCols + `, ctid, seq, 0::bigint FROM ` + t + `
	WHERE status = 0 AND key <> '' AND key > $2` + upper + ` ORDER BY key, seq LIMIT $1 FOR UPDATE NOWAIT`
	}
	upper := ""
	if bounded {
		upper = " AND key <= $5"
	}
	return `WITH r AS MATERIALIZED (SELECT ctid AS tid, key, row_number() OVER (PARTITION BY key ORDER BY seq) AS rank
		FROM ` + t + ` WHERE status = 0 AND key <> '' AND key > $3` + upper + ` ORDER BY key, seq LIMIT $2)
	SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, r.rank, (SELECT max(key) FROM r), (SELECT count(*) FROM r) FROM r
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m WHERE m.ctid = r.tid AND r.rank <= $4 AND m.status = 0
		AND (r.rank > 1 OR m.available_at <= $1) FOR UPDATE SKIP LOCKED) m`
}

// runsSQL claims, for each key of $1 whose head (seq $2, same position)
// this batch holds, up to $3 of the pending rows right after the head,
// each with its seq and its rank after the head (1 for the row right after
// it); keepRuns keeps of each key the unbroken run: ranks 1, 2, 3 … up to
// the first one missing or not due. Each key costs one range of the (key,
// seq) index, at most $3 rows long, however deep its backlog.
//
// With lockInOrder, each row is locked where the range finds it, NOWAIT,
// and returned with rank 0 (ranker numbers them): a row another
// transaction holds fails the statement (see runLocking). With lockRanked,
// the range ranks the rows in the statement's snapshot first, and each is
// then locked where the range found it (by its ctid, which no other
// statement can make stale while this one's snapshot sees the row),
// without a second probe of an index, with SKIP LOCKED: a row another
// transaction holds is missing from its key's ranks.
//
// Why a run never holds a row out of turn: the batch holds the key's head,
// so no other ordered claim takes the key's next rows (they are not heads,
// and runs are only taken behind a held head); rows of the key committed
// later have higher seqs (writers of one key take turns on its advisory
// lock, so seqs follow commit order). A row another transaction holds
// anyway — the continuation of a batch that ended without completing
// (aborted, or its session killed) still holds the rows after that
// batch's, and so may a relay in unordered mode — fails the statement or
// ends the run before it. So does a row gone or changed since the
// snapshot, with lockRanked (locking re-checks the row's latest version),
// and one not due.
//
// A key's rows after a seq are asked for as rowsAfter asks for them.
func (s *Store) runsSQL(locking runLocking) string {
	t := s.nm.table
	if locking == lockInOrder {
		return `SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, 0::bigint
	FROM unnest($1::text[], $2::bigint[]) AS k(key, head)
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m
		WHERE ` + rowsAfter("m", "k.key", "k.head") + ` LIMIT $3 FOR UPDATE NOWAIT) m`
	}
	return `SELECT ` + qualified("m", recordCols) + `, m.rowid, m.seq, run.rank
	FROM unnest($1::text[], $2::bigint[]) AS k(key, head)
	CROSS JOIN LATERAL (SELECT h.ctid AS tid, row_number() OVER (ORDER BY h.key, h.seq) AS rank FROM ` + t + ` h
		WHERE ` + rowsAfter("h", "k.key", "k.head") + ` LIMIT $3) run
	CROSS JOIN LATERAL (SELECT ` + lockedCols + ` FROM ` + t + ` m WHERE m.ctid = run.tid AND m.status = 0 FOR UPDATE SKIP LOCKED) m`
}

// rowsAfter is the condition and order, on the table as alias, of the
// pending rows of key after seq (both expressions), in the key's order:
// (key, seq) > (key, seq) AND key <= key, in (key, seq) order. Those are
// the rows of key = k AND seq > s in seq order, but in a form only the
// (key, seq) index serves. With the plain form, the generic plan of a
// table whose statistics count a few keys read the primary key from s on
// and filtered on the key: over ten keys whose rows interleave, ten rows
// read for each one taken, and an ordered claim that cost PostgreSQL half
// as much again as it does now (see TestClaimGenericPlans).
func rowsAfter(alias, key, seq string) string {
	a := alias + "."
	return "(" + a + "key, " + a + "seq) > (" + key + ", " + seq + ") AND " + a + "key <= " + key + " AND " + a + "key <> '' AND " +
		a + "status = 0 ORDER BY " + a + "key, " + a + "seq"
}

// keyedUnorderedSQL claims keyed rows with per-key order off: every due row,
// key by key from $3 (exclusive) up to $4 (inclusive, when bounded), along
// the (key, seq) index of pending keyed rows, skipping rows others hold.
func (s *Store) keyedUnorderedSQL(bounded bool) string {
	upper := ""
	if bounded {
		upper = " AND key <= $4"
	}
	return `SELECT ` + recordCols + `, ctid FROM ` + s.nm.table + `
	WHERE status = 0 AND key <> '' AND key > $3` + upper + ` AND available_at <= $1
	ORDER BY key, seq LIMIT $2 FOR UPDATE SKIP LOCKED`
}

// unkeyedSQL claims up to $2 unkeyed rows due at $1, by due time, along the
// (available_at, seq) index of pending unkeyed rows, and returns each
// one's seq after its columns; after, those after ($3, $4) in the index:
// the due time and seq of the last row an earlier statement of the claim
// took.
func (s *Store) unkeyedSQL(after bool) string {
	cond := ""
	if after {
		cond = ` AND (available_at, seq) > ($3, $4)`
	}
	return `SELECT ` + recordCols + `, ctid, seq FROM ` + s.nm.table + ` WHERE status = 0 AND key = '' AND available_at <= $1` + cond + `
	ORDER BY available_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED`
}

// lockedCols are the columns a claim's row-locking subquery passes on: what
// the claim reads of a row (recordCols and seq) and where the row is. Not
// *: PostgreSQL sets up each column of each plan node a row passes through
// at every execution, and the table's other columns are never read.
const lockedCols = recordBase + `, last_error, seq, ctid AS rowid`

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
	conn *pgxpool.Conn // the transaction's connection, the batch's until it ends
	tx   querier       // the connection, in the transaction; nil once ended
	recs []stores.Record
	tids []pgtype.TID // each record's row, where the claim locked it

	// fresh says the transaction is still to begin: its BEGIN goes in the
	// pipeline of its first statements (see opening).
	fresh bool

	ends        []runEnd // ordered: the last row of each key whose run is full (it may have more)
	continuable bool     // ordered, the claim reached every key due and free, and some run is full
}

func (b *batch) Records() []stores.Record { return b.recs }

// querier sends a batch's statements: its connection, in its transaction
// (a pgx.Tx in some tests).
type querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// begin starts a batch on a connection the batch holds until it ends. Its
// transaction begins with its first statements, in their round trip (see
// opening), and ends with Complete's, in theirs, or with end's ROLLBACK:
// pgx's Begin, Commit and Rollback would each cost a round trip of its
// own, and a relay woken for one event waits for every one of them.
func (s *Store) begin(ctx context.Context) (*batch, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &batch{s: s, conn: conn, tx: conn.Conn(), fresh: true}, nil
}

// opening queues BEGIN in pb, the pipeline of the batch's first
// statements, when its transaction is still to begin, and returns how many
// statements it queued (0 or 1). In a pipeline, an explicit BEGIN opens a
// transaction that outlasts the pipeline's end; a statement of it that
// fails leaves the transaction aborted until end rolls it back.
func (b *batch) opening(pb *pgx.Batch) int {
	if !b.fresh {
		return 0
	}
	b.fresh = false
	pb.Queue(`BEGIN`)
	return 1
}

// end rolls back the batch's transaction unless committed, and hands its
// connection back to the pool, which closes a connection still in a
// transaction (one whose rollback failed) rather than reuse it.
func (b *batch) end(ctx context.Context, committed bool) error {
	var err error
	if !committed && !b.fresh {
		_, err = b.tx.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
	}
	b.tx = nil
	b.conn.Release()
	b.conn = nil
	return err
}

// add adds x's record to the batch.
func (b *batch) add(x *numbered) {
	b.recs, b.tids = append(b.recs, x.rec), append(b.tids, x.tid)
}

// adder returns a callback for run that scans each row with sc and adds
// it to the batch; sc then holds the last row added.
func (b *batch) adder(sc *rowScanner) func(int, pgx.Rows) error {
	return func(_ int, r pgx.Rows) error {
		x, err := sc.scan(r)
		b.add(&x)
		return err
	}
}

// Complete applies o and commits in one round trip: one statement per kind
// of outcome, then COMMIT in the same pipeline. (Through pgx's Commit, the
// COMMIT was a round trip of its own, which a relay claiming back to back
// waits for before its next claim.) The transaction pgx opened is then
// over, unknown to pgx's Tx, which the batch drops with its connection
// (see end).
func (b *batch) Complete(ctx context.Context, o stores.Outcome) error {
	if b.tx == nil {
		if len(o.Published)+len(o.Retry)+len(o.Dead) == 0 {
			return nil
		}
		return errClosedBatch
	}
	s := b.s
	var pb pgx.Batch
	if len(o.Published) > 0 {
		tids, others := b.rows(o.Published)
		if len(tids) > 0 {
			if o.DeletePublished {
				pb.Queue(s.deleteRowsSQL(), tids)
			} else {
				pb.Queue(s.markRowsSQL(), tids, o.Now.UTC())
			}
		}
		if len(others) > 0 {
			if o.DeletePublished {
				pb.Queue(s.deletePublishedSQL(), pgIDs(others))
			} else {
				pb.Queue(s.markPublishedSQL(), pgIDs(others), o.Now.UTC())
			}
		}
	}
	if len(o.Retry) > 0 {
		ids, errs, next := failureArrays(o.Retry)
		pb.Queue(s.retrySQL(), ids, errs, next)
	}
	if len(o.Dead) > 0 {
		ids, errs, _ := failureArrays(o.Dead)
		pb.Queue(s.deadSQL(), ids, errs)
	}
	pb.Queue(`COMMIT`)
	err := commitBatch(b.tx.SendBatch(ctx, &pb), pb.Len())
	if endErr := b.end(ctx, err == nil); err == nil {
		err = endErr
	}
	if err != nil {
		return wrap("complete", err)
	}
	return nil
}

// commitBatch reads the n results of a batch whose last statement is
// COMMIT, and closes it. A transaction that had failed answers COMMIT with
// ROLLBACK: an error, as pgx's Commit makes it.
func commitBatch(br pgx.BatchResults, n int) error {
	for i := range n {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return err
		}
		if i == n-1 && tag.String() == "ROLLBACK" {
			_ = br.Close()
			return pgx.ErrTxCommitRollback
		}
	}
	return br.Close()
}

// The statements of Complete: $1 the events' IDs, and for markPublishedSQL
// $2 the time; for retrySQL and deadSQL, $2 each event's error and for
// retrySQL $3 its next attempt's time, in $1's order. Each reads the table
// along its IDs' index only (see plannerSettings): the failures find their
// error by their ID's position in $1 rather than by a join, whose order
// a generic plan could get the wrong way round (the whole table scanned
// for the few failed IDs).
// deleteRowsSQL and markRowsSQL are deletePublishedSQL and
// markPublishedSQL for the rows the batch locked ($1, their ctids): each
// row is read where it is, without a probe of the IDs' index. A locked row
// stays where it was until the transaction ends: only its holder can
// update or delete it, and VACUUM moves no row.
func (s *Store) deleteRowsSQL() string {
	return `DELETE FROM ` + s.nm.table + ` WHERE ctid = ANY($1::tid[])`
}

func (s *Store) markRowsSQL() string {
	return `UPDATE ` + s.nm.table + ` SET status = 1, published_at = $2 WHERE ctid = ANY($1::tid[])`
}

// rows returns the ctids of the batch's records among ids, and the IDs of
// any other (none, from the relay).
func (b *batch) rows(ids []uuid.UUID) (tids []pgtype.TID, others []uuid.UUID) {
	at := make(map[uuid.UUID]int, len(b.recs))
	for i := range b.recs {
		at[b.recs[i].ID] = i
	}
	tids = make([]pgtype.TID, 0, len(ids))
	for _, id := range ids {
		if i, ok := at[id]; ok && b.tids[i].Valid {
			tids = append(tids, b.tids[i])
		} else {
			others = append(others, id)
		}
	}
	return tids, others
}

func (s *Store) deletePublishedSQL() string {
	return `DELETE FROM ` + s.nm.table + ` WHERE id = ANY($1)`
}

func (s *Store) markPublishedSQL() string {
	return `UPDATE ` + s.nm.table + ` SET status = 1, published_at = $2 WHERE id = ANY($1)`
}

func (s *Store) retrySQL() string {
	return `UPDATE ` + s.nm.table + ` SET attempts = attempts + 1,
		last_error = ($2::text[])[array_position($1::uuid[], id)],
		available_at = ($3::timestamptz[])[array_position($1::uuid[], id)]
	WHERE id = ANY($1::uuid[])`
}

func (s *Store) deadSQL() string {
	return `UPDATE ` + s.nm.table + ` SET status = 2, attempts = attempts + 1,
		last_error = ($2::text[])[array_position($1::uuid[], id)]
	WHERE id = ANY($1::uuid[])`
}

// Abort implements stores.Batch.
func (b *batch) Abort(ctx context.Context) error {
	if b.tx == nil {
		return nil
	}
	if err := b.end(ctx, false); err != nil {
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
	// The claim's transaction is pgx's only through this Tx, whose
	// "begin" is an empty statement: BeginFunc puts fn under a savepoint of
	// it, and the Tx itself is never committed or rolled back.
	claim, err := b.conn.Conn().BeginTx(ctx, pgx.TxOptions{BeginQuery: ";"})
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, claim, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, handlerSettingsSQL); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, claimPlannerSQL)
		return err
	})
}
