package postgres

import (
	"context"
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
func (s *Store) Claim(ctx context.Context, p stores.ClaimParams) (stores.Batch, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, wrap("claim", err)
	}
	b := &batch{s: s, tx: tx}
	var pb pgx.Batch
	pb.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true)`,
		strconv.FormatInt(s.cfg.ClaimTimeout.Milliseconds(), 10))
	pb.Queue(`SELECT `+recordCols+` FROM `+s.nm.table+`
		WHERE status = 0 AND available_at <= $1
		ORDER BY available_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED`, p.Now.UTC(), p.Limit)
	br := tx.SendBatch(ctx, &pb)
	_, err = br.Exec()
	if err == nil {
		var rows pgx.Rows
		rows, err = br.Query()
		if err == nil {
			b.recs, err = pgx.CollectRows(rows, scanRecord)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
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
	if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil && err != pgx.ErrTxClosed {
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
