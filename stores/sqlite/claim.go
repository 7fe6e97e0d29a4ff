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
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/stores"
)

// Claim implements stores.Store with a lease, since SQLite has one writer
// and no SKIP LOCKED, and a transaction held open while the relay publishes
// would stall every enqueuer for a broker round trip.
//
// A short write transaction (BEGIN IMMEDIATE, so it waits for the write
// lock under busy_timeout and no other claim can pick the same rows in
// between) takes up to p.Limit claimable rows (pending, due, and whose
// lease is free or has lapsed) with UPDATE … RETURNING, and stamps them
// with a fresh random token and locked_until = p.Now + ClaimTimeout.
// Nothing stays open afterwards. Complete and Abort touch only rows that
// still carry the batch's token, so a relay whose lease lapsed and whose
// rows were claimed again cannot mark another relay's claim. Rows of a
// relay that died become claimable again once the lease lapses, by the
// clock of the next claim.
//
// By default keyed rows are claimed key by key, each key's head only (see
// walkSQL): so a key never has two rows leased at once and never one out of
// turn. Keys are visited round-robin from where the last claim stopped, so
// no key starves; unkeyed rows fill the rest of the batch, oldest first.
// With p.Unordered, one statement takes the oldest claimable rows, whatever
// their keys.
//
// When nothing is claimable, Claim costs one read and never takes the write
// lock, so idle relays polling do not slow enqueuers.
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if p.Limit <= 0 {
		return nil, fmt.Errorf("sqlite: claim: limit is %d, must be positive", p.Limit)
	}
	now := p.Now.UnixMicro()
	until := now + s.cfg.ClaimTimeout.Microseconds()
	var one int
	var err error
	if p.Unordered {
		err = s.db.QueryRowContext(ctx, s.q.due, now).Scan(&one)
	} else {
		err = s.db.QueryRowContext(ctx, s.q.dueOrdered, nil, nil, now, 1, "").Scan(&one)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return &batch{s: s, done: true}, nil
	}
	if err != nil {
		return nil, wrap("claim", err)
	}
	token, err := newToken()
	if err != nil {
		return nil, wrap("claim", err)
	}
	var recs []scanned
	if p.Unordered {
		// One statement, its own write transaction: a write statement
		// outside a transaction takes the write lock before it reads.
		recs, err = s.stamp(ctx, s.db, s.q.claim, token, until, now, p.Limit)
	} else {
		err = immediate(ctx, s.db, func(ctx context.Context, conn *sql.Conn) error {
			recs, err = s.claimOrdered(ctx, conn, token, until, now, p.Limit)
			return err
		})
	}
	if err != nil {
		// Nothing was stamped (the transaction rolled back), or rows were
		// stamped with a token nobody knows: they go back to the pool when
		// their lease lapses, as a dead relay's do.
		return nil, wrap("claim", err)
	}
	// RETURNING comes in no particular order.
	slices.SortFunc(recs, func(a, b scanned) int {
		return cmp.Or(cmp.Compare(a.available, b.available), cmp.Compare(a.seq, b.seq))
	})
	b := &batch{s: s, token: token, recs: make([]stores.Record, len(recs)), done: len(recs) == 0}
	for i, r := range recs {
		b.recs[i] = r.rec
	}
	return b, nil
}

// claimOrdered runs in the claim's write transaction: keys from the cursor
// to the last, then from the first up to the cursor, then unkeyed rows,
// each step only while the batch is not full.
func (s *Store) claimOrdered(ctx context.Context, conn *sql.Conn, token, until, now int64, limit int) ([]scanned, error) {
	cursor := s.cursor.get()
	recs, err := s.stamp(ctx, conn, s.q.claimKeys, token, until, now, limit, cursor)
	if err != nil {
		return nil, err
	}
	if len(recs) < limit && cursor != "" {
		more, err := s.stamp(ctx, conn, s.q.claimKeysBounded, token, until, now, limit-len(recs), "", cursor)
		if err != nil {
			return nil, err
		}
		recs = append(recs, more...)
	}
	// Moved before the transaction commits: a claim that then fails
	// costs the keys it passed one turn, nothing more.
	s.cursor.advance(cursor, recs, len(recs) == limit)
	if left := limit - len(recs); left > 0 {
		more, err := s.stamp(ctx, conn, s.q.claimUnkeyed, token, until, now, left)
		if err != nil {
			return nil, err
		}
		recs = append(recs, more...)
	}
	return recs, nil
}

// execer is *sql.DB or *sql.Conn.
type execer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// stamp runs a claim statement (UPDATE … RETURNING recordCols) with args
// token, until, now, limit and then more.
func (s *Store) stamp(ctx context.Context, q execer, query string, token, until, now int64, limit int, more ...any) ([]scanned, error) {
	rows, err := q.QueryContext(ctx, query, append([]any{token, until, now, limit}, more...)...)
	if err != nil {
		return nil, err
	}
	return scanRecords(rows)
}

// keyCursor remembers where the last keyed claim stopped, so the next one
// starts after it: keys are served round-robin.
type keyCursor struct {
	mu  sync.Mutex
	key string
}

func (c *keyCursor) get() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key
}

// advance moves the cursor past the keys just claimed when the batch was
// full (there may be more keys after them), and back to the start when it
// was not (every key was visited).
func (c *keyCursor) advance(from string, recs []scanned, full bool) {
	next := ""
	if full {
		for _, r := range recs {
			if k := r.rec.Key; k != "" && (next == "" || keyAfter(k, next, from)) {
				next = k
			}
		}
	}
	c.mu.Lock()
	c.key = next
	c.mu.Unlock()
}

// keyAfter reports whether a comes after b in a round-robin visit that
// started after from: keys above from come before keys at or below it.
func keyAfter(a, b, from string) bool {
	aHigh, bHigh := a > from, b > from
	if aHigh != bHigh {
		return !aHigh
	}
	return a > b
}

func newToken() (int64, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

type batch struct {
	s     *Store
	token int64
	recs  []stores.Record
	done  bool
}

func (b *batch) Records() []stores.Record { return b.recs }

// Complete applies o in one short IMMEDIATE transaction, one statement per
// kind of outcome, and releases the records o does not name. Each statement
// touches only records still holding this batch's lease: one that lapsed
// and went to another relay is left to that relay (this relay's publish of
// it was a duplicate, which the consumer's inbox drops). The same check makes
// a repeated Complete, or an Abort after a failed one, harmless.
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
	err := immediate(ctx, b.s.db, func(ctx context.Context, conn *sql.Conn) error {
		if len(o.Published) > 0 {
			var err error
			if o.DeletePublished {
				_, err = conn.ExecContext(ctx, q.deletePublished, idsJSON(o.Published), b.token)
			} else {
				_, err = conn.ExecContext(ctx, q.markPublished, idsJSON(o.Published), b.token, o.Now.UnixMicro())
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
			if _, err := conn.ExecContext(ctx, q.retry, fs, b.token); err != nil {
				return err
			}
		}
		if len(o.Dead) > 0 {
			fs, err := failuresJSON(o.Dead)
			if err != nil {
				return err
			}
			if _, err := conn.ExecContext(ctx, q.dead, fs, b.token); err != nil {
				return err
			}
		}
		if len(rest) > 0 {
			if _, err := conn.ExecContext(ctx, q.release, idsJSON(rest), b.token); err != nil {
				return err
			}
		}
		return nil
	})
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
// ctx is done, so that `defer b.Abort(ctx)` releases on shutdown too.
func (b *batch) Abort(ctx context.Context) error {
	if b.done {
		return nil
	}
	_, err := b.s.db.ExecContext(context.WithoutCancel(ctx), b.s.q.release, idsJSON(ids(b.recs)), b.token)
	if err != nil {
		// The records go back when the lease lapses.
		return wrap("abort", err)
	}
	b.done = true
	return nil
}

func ids(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// idsJSON encodes ids as a JSON array of 32-digit hex strings, one parameter
// however many there are, for `SELECT unhex(value) FROM json_each(?)`.
func idsJSON(ids []uuid.UUID) string {
	var b strings.Builder
	b.Grow(2 + len(ids)*35)
	b.WriteByte('[')
	var buf [32]byte
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		hex.Encode(buf[:], id[:])
		b.WriteByte('"')
		b.Write(buf[:])
		b.WriteByte('"')
	}
	b.WriteByte(']')
	return b.String()
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
