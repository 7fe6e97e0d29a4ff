package sqlite

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// Claim implements stores.Store with a lease, since SQLite has one writer
// and no SKIP LOCKED, and a transaction held open while the relay publishes
// would stall every enqueuer for a broker round trip.
//
// A short write transaction (BEGIN IMMEDIATE, so no other claim can pick
// the same rows in between; it waits for the write lock as lock.go says,
// until ctx ends or for at most half of ClaimTimeout) takes up to p.Limit
// claimable rows (pending, due, and whose lease is free or has lapsed)
// with UPDATE … RETURNING, and stamps them with a fresh random token and
// locked_until = p.Now + ClaimTimeout.
// Nothing stays open afterwards. Complete and Abort touch only rows that
// still carry the batch's token, so a relay whose lease lapsed and whose
// rows were claimed again cannot mark another relay's claim. Rows of a
// relay that died become claimable again once the lease lapses, by the
// clock of the next claim.
//
// By default keyed rows are claimed key by key (see claimOrdered): each
// key's head and, with p.PerKey, the run right after it, so what a batch
// holds of a key is always the key's next rows, and a key never has rows
// leased to two batches at once nor one out of turn. Keys are visited
// round-robin from where the last claim stopped, so no key starves; unkeyed
// rows and the runs share the rest of the batch. With p.Unordered, one
// statement takes the oldest claimable rows, whatever their keys.
//
// When nothing is claimable, Claim costs one read and never takes the write
// lock, so idle relays polling do not slow enqueuers.
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("sqlite: claim: limit is %d, must be positive", p.Limit)
	}
	start := time.Now() // the lease began at p.Now, before this
	now := p.Now.UnixMicro()
	until := now + s.cfg.ClaimTimeout.Microseconds()
	token, err := newToken()
	if err != nil {
		return nil, wrap("claim", err)
	}
	// Is anything claimable? One read, which never waits for the writer:
	// before queueing for the write lock, and again after, if the queue
	// took a while (another worker's claim may have taken everything).
	dueQ, dueArgs := s.q.due, []any{now}
	if !p.Unordered {
		dueQ, dueArgs = s.q.dueOrdered, []any{nil, nil, now, 1, ""}
	}
	nothingDue := func(ctx context.Context, tx *wtx) (bool, error) {
		var one int
		err := tx.queryRow(ctx, dueQ, dueArgs...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return true, nil
		}
		return false, err
	}
	var recs []scanned
	// The wait for the write lock ends with ctx, or after half a lease: the
	// lease runs from p.Now, and the batch must keep enough of it to be
	// published and completed.
	w := wait{until: start.Add(s.cfg.ClaimTimeout / 2), gate: s.d.gate, skip: nothingDue,
		prepare: []string{s.q.claim}}
	if !p.Unordered {
		w.prepare = []string{s.q.claimKeys, s.q.claimUnkeyed}
		if s.cursor.Get() != "" {
			w.prepare = append(w.prepare, s.q.claimKeysBounded)
		}
		if p.PerKey > 1 {
			w.prepare = append(w.prepare, s.q.claimRuns)
		}
	}
	err = immediate(ctx, s.db, w, func(ctx context.Context, tx *wtx) error {
		if p.Unordered {
			recs, err = s.stamp(ctx, tx, s.q.claim, token, until, now, p.Limit)
		} else {
			recs, err = s.claimOrdered(ctx, tx, token, until, now, p.Limit, max(1, p.PerKey))
		}
		return err
	})
	if errors.Is(err, errSkipped) {
		return &batch{s: s, done: true}, nil
	}
	if err != nil {
		// Nothing was stamped (the transaction rolled back), or rows were
		// stamped with a token nobody knows: they go back to the pool when
		// their lease lapses, as a dead relay's do.
		return nil, wrap("claim", err)
	}
	sortRecords(recs)
	b := &batch{s: s, token: token, until: until, claimed: start,
		recs: make([]stores.Record, len(recs)), done: len(recs) == 0}
	for i, r := range recs {
		b.recs[i] = r.rec
	}
	return b, nil
}

// claimOrdered runs in the claim's write transaction: heads of keys from
// the cursor to the last, then from the first up to the cursor (see
// walkSQL; with runs, at most a quarter of limit, see sqlkit.HeadLimit), then
// unkeyed rows, then, with perKey > 1, the runs after the heads it took
// (see runsSQL), each step only while the batch is not full. Unkeyed rows
// take up to half the room the heads left (all of it without runs), oldest
// first; the runs share the rest evenly among the heads' keys, up to
// perKey-1 rows after each head: a claim that finds few keys takes long
// runs of each, one that finds many takes their heads.
//
// Why what a batch holds of a key is always the key's next rows, and no
// other batch holds any of them: the claim takes a key's head and then, in
// the same write transaction (no other writer comes in between), only rows
// right behind a head it took: the key's pending rows after the head, in
// seq order, each due and not leased, ending before the first that is not,
// so it never takes a row past one it left out (and seq is commit order: a
// row committed later comes after them, see the package documentation). A
// batch's rows share its token and its locked_until: while the lease
// lasts, the key's head is leased, and every ordered claim starts a key at
// its head, so none takes any row of the key; when the lease lapses, it
// lapses for all of them at once, and the next claim starts again from the
// head. Complete and Abort end the lease of all of them in one
// transaction: a named row is marked (published, due again later, or dead),
// an unnamed one released, pending and uncharged; the key's lowest pending
// seq is its head again, where the next claim starts.
func (s *Store) claimOrdered(ctx context.Context, tx *wtx, token, until, now int64, limit, perKey int) ([]scanned, error) {
	cursor := s.cursor.Get()
	// A quarter even for pipelined runs: a tenth, which PostgreSQL's
	// walk gains from, claimed no faster here (BenchmarkClaimOrdered,
	// 1,000 keys: 58-78 k events/s against 62-87 k, 100 keys the same).
	keyed := sqlkit.HeadLimit(limit, perKey, false)
	recs, err := s.stamp(ctx, tx, s.q.claimKeys, token, until, now, keyed, cursor)
	if err != nil {
		return nil, err
	}
	if len(recs) < keyed && cursor != "" {
		more, err := s.stamp(ctx, tx, s.q.claimKeysBounded, token, until, now, keyed-len(recs), "", cursor)
		if err != nil {
			return nil, err
		}
		recs = append(recs, more...)
	}
	// Moved before the transaction commits: a claim that then fails
	// costs the keys it passed one turn, nothing more.
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.rec.Key
	}
	s.cursor.Advance(cursor, len(recs) == keyed, keys)
	heads := recs[:len(recs):len(recs)]
	runs := len(heads) > 0 && perKey > 1
	if room := limit - len(recs); room > 0 {
		more, err := s.stamp(ctx, tx, s.q.claimUnkeyed, token, until, now, sqlkit.UnkeyedRoom(room, runs))
		if err != nil {
			return nil, err
		}
		recs = append(recs, more...)
	}
	if room := limit - len(recs); runs && room > 0 {
		per := sqlkit.RunLength(room, len(heads), perKey)
		more, err := s.stamp(ctx, tx, s.q.claimRuns, token, until, now, room, seqsJSON(heads), per)
		if err != nil {
			return nil, err
		}
		recs = append(recs, more...)
	}
	return recs, nil
}

// stamp runs a claim statement (UPDATE … RETURNING recordCols) with args
// token, until, now, limit and then more.
func (s *Store) stamp(ctx context.Context, tx *wtx, query string, token, until, now int64, limit int, more ...any) ([]scanned, error) {
	rows, err := tx.query(ctx, query, append([]any{token, until, now, limit}, more...)...)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// seqsJSON is the seqs of recs as a JSON array, in recs' order.
func seqsJSON(recs []scanned) string {
	b := make([]byte, 0, 2+len(recs)*8)
	b = append(b, '[')
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, r.seq, 10)
	}
	return string(append(b, ']'))
}

// sortRecords puts a claim's rows, which RETURNING gives in no particular
// order, oldest first (by due time, then seq), except that the rows of one
// key take the places the key's rows hold in that order in seq order, the
// key's order: a run's later row may be due before its head (a head that
// waited for a retry is due later than the rows after it).
func sortRecords(recs []scanned) {
	slices.SortFunc(recs, func(a, b scanned) int {
		return cmp.Or(cmp.Compare(a.available, b.available), cmp.Compare(a.seq, b.seq))
	})
	places := map[string][]int{}
	for i, r := range recs {
		if r.rec.Key != "" {
			places[r.rec.Key] = append(places[r.rec.Key], i)
		}
	}
	var run []scanned
	for _, at := range places {
		if len(at) < 2 {
			continue
		}
		run = run[:0]
		for _, i := range at {
			run = append(run, recs[i])
		}
		slices.SortFunc(run, func(a, b scanned) int { return cmp.Compare(a.seq, b.seq) })
		for j, i := range at {
			recs[i] = run[j]
		}
	}
}

func newToken() (int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

type batch struct {
	s       *Store
	token   int64
	until   int64     // the lease's end, unix µs by the claiming clock
	claimed time.Time // when Claim was called, on this process's monotonic clock
	recs    []stores.Record
	done    bool
}

// leaseEnd is when the batch's lease ends on this process's monotonic clock:
// ClaimTimeout after the claim, or sooner if the relay's clock (now, when
// known) says less of it is left. Another relay may claim the records from
// then on.
func (b *batch) leaseEnd(now time.Time) time.Time {
	end := b.claimed.Add(b.s.cfg.ClaimTimeout)
	if !now.IsZero() {
		left := time.Duration(b.until-now.UnixMicro()) * time.Microsecond
		if e := time.Now().Add(left); e.Before(end) {
			end = e
		}
	}
	return end
}

func (b *batch) Records() []stores.Record { return b.recs }

// Complete applies o in one short IMMEDIATE transaction, one statement per
// kind of outcome, and releases the records o does not name. Each statement
// touches only records still holding this batch's lease: one that lapsed
// and went to another relay is left to that relay (this relay's publish of
// it was a duplicate, which the consumer's inbox drops). The same check makes
// a repeated Complete, or an Abort after a failed one, harmless.
//
// Complete waits for the write lock as long as the batch's lease lasts (or
// until ctx ends, if sooner): a busy database delays the outcome instead of
// having the batch published again. When the lease ends first, Complete
// fails, saying so, and applies nothing.
func (b *batch) Complete(ctx context.Context, o stores.Outcome) error {
	if b.done {
		if len(o.Published)+len(o.Retry)+len(o.Dead) == 0 {
			return nil
		}
		return errClosedBatch
	}
	named := make(map[uuid.UUID]bool, len(o.Published)+len(o.Retry)+len(o.Dead))
	for _, id := range o.Published {
		named[id] = true
	}
	for _, f := range o.Retry {
		named[f.ID] = true
	}
	for _, f := range o.Dead {
		named[f.ID] = true
	}
	var rest []uuid.UUID
	for _, r := range b.recs {
		if !named[r.ID] {
			rest = append(rest, r.ID)
		}
	}
	q := &b.s.q
	// Wait for the write lock as long as the lease lasts: giving up sooner
	// would have the batch published again though no relay died.
	w := wait{until: b.leaseEnd(o.Now), gate: b.s.d.gate}
	published := q.markPublished
	if o.DeletePublished {
		published = q.deletePublished
	}
	for _, st := range []struct {
		n int
		q string
	}{{len(o.Published), published}, {len(o.Retry), q.retry}, {len(o.Dead), q.dead}, {len(rest), q.release}} {
		if st.n > 0 {
			w.prepare = append(w.prepare, st.q)
		}
	}
	err := immediate(ctx, b.s.db, w, func(ctx context.Context, tx *wtx) error {
		if len(o.Published) > 0 {
			var err error
			if o.DeletePublished {
				_, err = tx.exec(ctx, q.deletePublished, sqlkit.IDsJSON(o.Published), b.token)
			} else {
				_, err = tx.exec(ctx, q.markPublished, sqlkit.IDsJSON(o.Published), b.token, o.Now.UnixMicro())
			}
			if err != nil {
				return err
			}
		}
		if len(o.Retry) > 0 {
			fs, err := failuresJSON(o.Retry)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, q.retry, fs, b.token); err != nil {
				return err
			}
		}
		if len(o.Dead) > 0 {
			fs, err := failuresJSON(o.Dead)
			if err != nil {
				return err
			}
			if _, err := tx.exec(ctx, q.dead, fs, b.token); err != nil {
				return err
			}
		}
		if len(rest) > 0 {
			if _, err := tx.exec(ctx, q.release, sqlkit.IDsJSON(rest), b.token); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errLockTimeout) {
		// Rare: other writers held the lock for the whole lease.
		err = fmt.Errorf("the lease ended before the outcome could be written, "+
			"so another relay may claim and publish these events again: %w", err)
	}
	if err != nil {
		// Nothing was applied. The batch stays open: Complete may be
		// tried again and Abort releases it.
		return wrap("complete", err)
	}
	b.done = true
	return nil
}

// Abort implements stores.Batch: it clears the batch's lease, so the records
// are claimable at once rather than when the lease lapses. It runs even when
// ctx is done, so that `defer b.Abort(ctx)` releases on shutdown too, and
// waits for the write lock for at most maxAbortWait (5s): failing, the
// records go back when the lease lapses. Once the lease has ended there is
// nothing to release, and Abort writes nothing.
func (b *batch) Abort(ctx context.Context) error {
	if b.done {
		return nil
	}
	end := b.leaseEnd(time.Time{})
	if !time.Now().Before(end) {
		b.done = true
		return nil
	}
	// Not for long, though: the lease ends by itself.
	end = minTime(end, time.Now().Add(maxAbortWait))
	err := immediate(context.WithoutCancel(ctx), b.s.db, wait{until: end, gate: b.s.d.gate}, func(ctx context.Context, tx *wtx) error {
		_, err := tx.exec(ctx, b.s.q.release, sqlkit.IDsJSON(ids(b.recs)), b.token)
		return err
	})
	if err != nil {
		// The records go back when the lease lapses.
		return wrap("abort", err)
	}
	b.done = true
	return nil
}

// maxAbortWait bounds Abort's wait for the write lock.
const maxAbortWait = 5 * time.Second

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func ids(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

type failureJSON struct {
	ID   string `json:"id"`
	Err  string `json:"err"`
	Next int64  `json:"next"`
}

// failuresJSON encodes fs as one JSON array parameter.
func failuresJSON(fs []stores.Failure) (string, error) {
	out := make([]failureJSON, len(fs))
	for i, f := range fs {
		out[i] = failureJSON{ID: hex.EncodeToString(f.ID[:]), Err: f.Err}
		if !f.NextAttempt.IsZero() {
			out[i].Next = f.NextAttempt.UnixMicro()
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}
