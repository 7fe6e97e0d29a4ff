package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/stores"
)

// claimSQL locks up to ? due pending rows in claim order. FORCE INDEX keeps
// the plan on the pending range whatever the optimizer thinks of the
// table's statistics.
func claimSQL(table string) string {
	return `SELECT ` + recordCols + ` FROM ` + table + ` FORCE INDEX (pending)
		WHERE status = ` + statusPending + ` AND available_at <= ?
		ORDER BY available_at, seq LIMIT ? FOR UPDATE SKIP LOCKED`
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
	b.recs, err = queryRecords(ctx, b.tx, s.claimSQL, dbTime(p.Now), p.Limit)
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
		broken = err != nil
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
// rows as JSON_TABLE rows joined on the unique id (see idsJSON).
func (s *Store) apply(ctx context.Context, tx *sql.Tx, o stores.Outcome) error {
	err := chunks(len(o.Published), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
		ids := idsJSON(o.Published[lo:hi])
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
