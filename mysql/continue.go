package mysql

import (
	"context"

	"github.com/outboxgo/outbox/stores"
)

var (
	_ stores.Continuer = (*batch)(nil)
	_ stores.Resumer   = (*batch)(nil)
)

// Continue implements stores.Continuer: on a connection and in a
// transaction of its own, it claims for each key of b whose run was full
// (it took all it could: more may follow) the rows that follow b's run,
// up to p.Limit rows shared fairly among the keys and at most p.PerKey of
// each (see claimRuns). It claims nothing when the pool has no connection
// free (SetMaxOpenConns reached, none idle): the continuation would wait
// for one, or take the one a fresh claim or a completion needs.
//
// Why a continuation never holds a row out of turn. Take a key K whose run
// in b ends at row E (seq e): b holds K's rows from its head H up to E,
// locked and still pending (see batch.runs), so no other ordered claim
// takes any row of K — their head of K is H, or a row below it, and runs
// are only taken behind a head held, or a run held as here. runSQL lists,
// in a snapshot S3, K's first pending rows after E in seq order, R1, R2, …:
// a row of K between E and Ri that S3 does not have pending is done
// (published, dead or deleted; pending again only by Replay), and none can
// commit there later, since writers of K take turns on the key-lock table
// and Ri is in S3 (rows committed after S3 have higher seqs). lockRunSQL
// locks them with SKIP LOCKED and rechecks each one's latest version, and
// only the unbroken run from R1 is kept. All this happens while b holds H
// … E, or after b ended: once b has completed, K's head is R1 if the
// continuation holds it (another claim then skips K), and if b ended
// before the continuation locked R1, another claim may have taken R1
// first, which the continuation then skips, and with it every row after
// it. The relay publishes the continuation only after b completed and
// sends nothing of a key whose rows in b failed or were held back
// (stores.Continuer).
func (b *batch) Continue(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	if !b.continuable || p.Unordered || len(b.ends) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	s := b.s
	if st := s.db.Stats(); st.MaxOpenConnections > 0 && st.Idle == 0 && st.OpenConnections >= st.MaxOpenConnections {
		return nil, nil
	}
	next, err := s.begin(ctx)
	if err != nil {
		return nil, wrap("continue", err)
	}
	ends := b.ends
	n := min(max(p.PerKey, 1), p.Limit, (2*p.Limit+len(ends)-1)/len(ends))
	got, err := s.claimRuns(ctx, next.tx, dbTime(p.Now), ends, n, p.Limit)
	if err != nil {
		_ = next.Abort(ctx)
		return nil, wrap("continue", err)
	}
	if len(got.rows) == 0 {
		return nil, next.Abort(ctx)
	}
	next.hold(got.rows)
	next.ends, next.continuable = got.full, len(got.full) > 0 && !got.starved
	return next, nil
}

// Resume implements stores.Resumer: one round trip in the batch's
// transaction, which fails when the server ended it (its claim timeout
// passed while it waited: see Config.ClaimTimeout) and otherwise starts
// its idle timeout afresh.
func (b *batch) Resume(ctx context.Context) error {
	if b.tx == nil {
		return errClosedBatch
	}
	if _, err := b.tx.ExecContext(ctx, `DO 0`); err != nil {
		return wrap("resume", err)
	}
	return nil
}
