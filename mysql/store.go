package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/internal/sqltx"
	"github.com/outboxgo/outbox/stores"
)

// Store is the relay's side of the outbox table: DB.Store returns it. It
// implements stores.Store. It has no stores.Listener: MySQL has no
// LISTEN/NOTIFY, so relays poll.
type Store struct {
	d        *DB
	db       *sql.DB
	cfg      Config
	log      *slog.Logger
	table    string // quoted
	idRows   string // see Config.idRows
	claimSQL string // unordered
	// The default claim, with per-key order: see claimOrdered.
	headsSQL, headsBoundedSQL, blankClaimSQL, blankProbeSQL string
	cursor                                                  sqlkit.KeyCursor
	sess                                                    atomic.Pointer[session] // set by the first claim
}

func newStore(d *DB) *Store {
	c := d.cfg
	t := c.quotedTable()
	return &Store{d: d, db: d.db, cfg: c, log: c.Logger, table: t, idRows: c.idRows(), claimSQL: claimSQL(t),
		headsSQL: headsSQL(t, false), headsBoundedSQL: headsSQL(t, true), blankClaimSQL: blankClaimSQL(t), blankProbeSQL: blankProbeSQL(t)}
}

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// Migrate implements stores.Store: it brings the outbox table (not the
// inbox table; DB.Migrate does both) to the latest schema version.
func (s *Store) Migrate(ctx context.Context) error {
	return s.d.migrate(ctx, s.d.outboxTables())
}

// CheckSchema returns ErrSchemaMissing (wrapped) unless the table exists.
func (s *Store) CheckSchema(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, `SELECT 1 FROM `+s.table+` LIMIT 0`)
	if err == nil {
		err = rows.Close()
	}
	if err != nil {
		return wrap("check schema", err)
	}
	return nil
}

// recordCols are the columns of a stores.Record, times as text (see dbTime).
const recordCols = "id, topic, `key`, type, payload, headers, CAST(created_at AS CHAR), CAST(available_at AS CHAR), " +
	"attempts, COALESCE(last_error, '')"

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryRecords runs a SELECT of recordCols.
func queryRecords(ctx context.Context, q queryer, query string, args ...any) ([]stores.Record, error) {
	var out []stores.Record
	err := scanRecords(ctx, q, query, args, func(rows *sql.Rows) error {
		var rec stores.Record
		if err := scanRecord(rows, &rec); err != nil {
			return err
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}

// seqRecord is a record and its row's seq.
type seqRecord struct {
	seq uint64
	rec stores.Record
}

// querySeqRecords runs a SELECT of seq, then recordCols.
func querySeqRecords(ctx context.Context, q queryer, query string, args ...any) ([]seqRecord, error) {
	var out []seqRecord
	err := scanRecords(ctx, q, query, args, func(rows *sql.Rows) error {
		var r seqRecord
		if err := scanRecord(rows, &r.rec, &r.seq); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// scanRecords runs query and calls f on each row.
func scanRecords(ctx context.Context, q queryer, query string, args []any, f func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanRecord scans a row of the columns lead (if any), then recordCols,
// into rec.
func scanRecord(rows *sql.Rows, rec *stores.Record, lead ...any) error {
	var id, headers []byte
	var available time.Time
	dest := append(lead, &id, &rec.Topic, &rec.Key, &rec.Type, &rec.Payload, &headers,
		utcTime{&rec.CreatedAt}, utcTime{&available}, &rec.Attempts, &rec.LastError)
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	var err error
	if rec.ID, err = uuidFromBytes(id); err != nil {
		return err
	}
	if len(headers) > 0 {
		if err := headerjson.Unmarshal(headers, &rec.Headers); err != nil {
			return fmt.Errorf("mysql: headers of %s: %w", rec.ID, err)
		}
	}
	if available.After(rec.CreatedAt) && rec.Attempts == 0 {
		rec.NotBefore = available
	}
	return nil
}

// inTx runs f in a READ COMMITTED transaction and commits it, or rolls it
// back when f fails.
func (s *Store) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return sqltx.Commit(ctx, tx)
}

// Purge implements stores.Store. Published rows: it locks the oldest with
// SKIP LOCKED, so purges running at once share the work instead of waiting
// for each other, and deletes them by primary key (see seqsJSON). MySQL
// takes neither LIMIT in an IN subquery nor a locking subquery on the table
// it deletes from, hence two statements in one READ COMMITTED transaction.
// Dead rows: it reads the oldest from the dead list's index without locking
// (a locking scan there would lock the first pending row past the range)
// and deletes those still dead, by primary key.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (n int64, err error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		if !p.Before.IsZero() {
			seqs, err := querySeqs(ctx, tx, `SELECT seq FROM `+s.table+` FORCE INDEX (published)
				WHERE published_at < ? ORDER BY published_at LIMIT ? FOR UPDATE SKIP LOCKED`, dbTime(p.Before), p.Limit)
			if err != nil {
				return err
			}
			k, err := s.deleteSeqs(ctx, tx, seqs, "")
			n += k
			if err != nil {
				return err
			}
		}
		if !p.DeadBefore.IsZero() {
			seqs, err := querySeqs(ctx, tx, `SELECT seq FROM `+s.table+` FORCE INDEX (dead_list)
				WHERE status = `+statusDead+` AND created_at < ? ORDER BY created_at, id LIMIT ?`, dbTime(p.DeadBefore), p.Limit)
			if err != nil {
				return err
			}
			k, err := s.deleteSeqs(ctx, tx, seqs, ` WHERE t.status = `+statusDead)
			n += k
			return err
		}
		return nil
	})
	if err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}

// querySeqs returns the seq column of a query's rows.
func querySeqs(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]uint64, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seqs []uint64
	for rows.Next() {
		var seq uint64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	return seqs, rows.Err()
}

// deleteSeqs deletes the rows of seqs that match where (empty: all) by
// primary key, in statements of at most maxStatementRows, and returns how
// many it deleted.
func (s *Store) deleteSeqs(ctx context.Context, tx *sql.Tx, seqs []uint64, where string) (n int64, err error) {
	err = chunks(len(seqs), maxStatementRows, func(int) int { return 20 }, func(lo, hi int) error {
		res, err := tx.ExecContext(ctx, `DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT UNSIGNED PATH '$')) AS f
			STRAIGHT_JOIN `+s.table+` AS t FORCE INDEX (PRIMARY) ON t.seq = f.seq`+where, seqsJSON(seqs[lo:hi]))
		if err != nil {
			return err
		}
		k, err := res.RowsAffected()
		n += k
		return err
	})
	return n, err
}
