package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/stores"
)

var (
	_ stores.Continuer = (*batch)(nil)
	_ stores.Resumer   = (*batch)(nil)
)

// Continue implements stores.Continuer: in a transaction of its own, it
// claims for each key of b whose run was full (it took as many rows as it
// could: more may follow) the run that follows b's (see runsSQL), up to
// p.Limit rows shared evenly among the keys, at most p.PerKey of each. It
// claims nothing when the pool has no connection free.
//
// Why a continuation never holds a row out of turn: b holds each key's
// rows up to its run's end, locked and still pending, so no other ordered
// claim takes any row of the key (its head is in b); the continuation's
// first row of a key is the key's first pending row after b's, in the
// continuation's snapshot, and its rows are locked before b ends. Once b
// has completed, the key's head is the continuation's first row, which it
// holds. Rows committed later have higher seqs, as for runsSQL. Its runs
// are locked in order, and ranked when one meets a row another
// transaction holds (see runLocking).
func (b *batch) Continue(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if !b.continuable || p.Unordered || len(b.ends) == 0 {
		return nil, nil
	}
	s := b.s
	if st := s.pool.Stat(); st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		// No connection is free: the continuation would wait for one,
		// or take the one a fresh claim or a completion needs.
		return nil, nil
	}
	next, err := attempt(s, false, func(locking runLocking) (*batch, error) { return b.continueIn(ctx, p, locking) })
	if err != nil || next == nil {
		return nil, err
	}
	return next, nil
}

// continueIn is one attempt at Continue, in a transaction of its own, its
// runs locked as locking says. It returns nil when it claimed nothing.
func (b *batch) continueIn(ctx context.Context, p stores.ClaimParams, locking runLocking) (*batch, error) {
	s := b.s
	next, err := s.begin(ctx)
	if err != nil {
		return nil, wrap("continue", err)
	}
	per := min(max(p.PerKey, 1), (p.Limit+len(b.ends)-1)/len(b.ends))
	var pb pgx.Batch
	next.opening(&pb)
	pb.Queue(claimSettingsSQL, strconv.FormatInt(s.cfg.ClaimTimeout.Milliseconds(), 10))
	err = run(ctx, next.tx, &pb, pb.Len(), nil)
	if err == nil {
		next.ends, err = s.claimRuns(ctx, next.tx, p.Now, next, append([]runEnd(nil), b.ends...), per, p.Limit, locking, nil)
	}
	if err != nil {
		_ = next.Abort(ctx)
		return nil, wrap("continue", err)
	}
	if len(next.recs) == 0 {
		return nil, next.Abort(ctx)
	}
	next.continuable = len(next.ends) > 0
	return next, nil
}

// Resume implements stores.Resumer: one round trip in the batch's
// transaction, which fails when the database ended it (its claim timeout
// passed while it waited) and otherwise starts its claim timeout afresh.
func (b *batch) Resume(ctx context.Context) error {
	if b.tx == nil {
		return errClosedBatch
	}
	if _, err := b.tx.Exec(ctx, `SELECT 1`); err != nil {
		return wrap("resume", err)
	}
	return nil
}
