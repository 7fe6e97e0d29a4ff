package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// Store is the relay side of a MySQL or MariaDB outbox, over database/sql
// with github.com/go-sql-driver/mysql. It implements stores.Store. It has
// no stores.Listener: MySQL has no LISTEN/NOTIFY, so relays poll.
type Store struct {
	db       *sql.DB
	cfg      Config
	table    string // quoted
	idRows   string // see Config.idRows
	claimSQL string // unordered
	// The default claim, with per-key order: see claimOrdered.
	headsSQL, headsBoundedSQL, blankClaimSQL, blankProbeSQL string
	cursor                                                  keyCursor
	sess                                                    atomic.Pointer[session] // set by the first claim
}

var _ stores.Store = (*Store)(nil)

// New returns the store for the table cfg names (nil: outbox_messages), in
// the database db connects to. db stays the caller's to close.
func New(db *sql.DB, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := c.quotedTable()
	return &Store{db: db, cfg: c, table: t, idRows: c.idRows(), claimSQL: claimSQL(t),
		headsSQL: headsSQL(t, false), headsBoundedSQL: headsSQL(t, true), blankClaimSQL: blankClaimSQL(t), blankProbeSQL: blankProbeSQL(t)}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// Migrate implements stores.Store.
func (s *Store) Migrate(ctx context.Context) error {
	return Migrate(ctx, s.db, &s.cfg)
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

// Stats implements stores.Store. Topics are told apart byte for byte:
// grouping by the length as well undoes the collation's PAD SPACE, which
// would take "a" and "a " for one topic.
func (s *Store) Stats(ctx context.Context, _ stores.StatsParams) ([]stores.TopicStats, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT topic,
		COUNT(CASE WHEN status = `+statusPending+` THEN 1 END),
		CAST(MIN(CASE WHEN status = `+statusPending+` THEN created_at END) AS CHAR),
		COUNT(CASE WHEN status = `+statusDead+` THEN 1 END),
		COUNT(CASE WHEN status = `+statusPublished+` THEN 1 END)
		FROM `+s.table+` GROUP BY topic, LENGTH(topic) ORDER BY topic, LENGTH(topic)`)
	if err != nil {
		return nil, wrap("stats", err)
	}
	defer rows.Close()
	var out []stores.TopicStats
	for rows.Next() {
		var ts stores.TopicStats
		if err := rows.Scan(&ts.Topic, &ts.Pending, utcTime{&ts.OldestPending}, &ts.Dead, &ts.Published); err != nil {
			return nil, wrap("stats", err)
		}
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
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
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stores.Record
	for rows.Next() {
		var rec stores.Record
		var id, headers []byte
		var available time.Time
		err := rows.Scan(&id, &rec.Topic, &rec.Key, &rec.Type, &rec.Payload, &headers,
			utcTime{&rec.CreatedAt}, utcTime{&available}, &rec.Attempts, &rec.LastError)
		if err != nil {
			return nil, err
		}
		if rec.ID, err = uuidFromBytes(id); err != nil {
			return nil, err
		}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &rec.Headers); err != nil {
				return nil, fmt.Errorf("mysql: headers of %s: %w", rec.ID, err)
			}
		}
		if available.After(rec.CreatedAt) && rec.Attempts == 0 {
			rec.NotBefore = available
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// topicFilter matches t.topic exactly: the collation (utf8mb4_bin) ignores
// trailing spaces, comparing the byte lengths too does not.
const topicFilter = ` AND t.topic = ? AND LENGTH(t.topic) = ?`

// Dead implements stores.Store.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	q := `SELECT ` + recordCols + ` FROM ` + s.table + ` AS t WHERE status = ` + statusDead
	var args []any
	if p.Topic != "" {
		q += topicFilter
		args = append(args, p.Topic, len(p.Topic))
	}
	q += ` ORDER BY created_at, seq LIMIT ?`
	out, err := queryRecords(ctx, s.db, q, append(args, p.Limit)...)
	if err != nil {
		return nil, wrap("dead", err)
	}
	return out, nil
}

// Replay implements stores.Store. It runs READ COMMITTED, like every
// locking statement of the store: under REPEATABLE READ its scan of the dead
// rows would lock the gaps between them, where a relay's Complete inserts
// the rows it declares dead, and the two would deadlock. Named rows are
// looked up by id (see idsJSON), the others read from the dead range of
// the pending index.
func (s *Store) Replay(ctx context.Context, p stores.ReplayParams) (n int64, err error) {
	set := ` SET t.status = ` + statusPending + `, t.attempts = 0, t.available_at = ? WHERE t.status = ` + statusDead
	args := []any{dbTime(p.Now)}
	if p.Topic != "" {
		set += topicFilter
		args = append(args, p.Topic, len(p.Topic))
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		exec := func(q string, args ...any) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			n += k
			return err
		}
		if len(p.IDs) == 0 {
			return exec(`UPDATE `+s.table+` AS t FORCE INDEX (pending)`+set, args...)
		}
		return chunks(len(p.IDs), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
			return exec(`UPDATE `+s.idRows+set, append([]any{idsJSON(p.IDs[lo:hi])}, args...)...)
		})
	})
	if err != nil {
		return 0, wrap("replay", err)
	}
	return n, nil
}

// DeadLetter implements stores.Store: one statement (per 10,000 ids) in a
// READ COMMITTED transaction, the rows looked up by id (see idsJSON). A
// record a relay holds right now is waited for (the claim ends within
// ClaimTimeout), then changed if still pending.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (n int64, err error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	reason := errText(p.Reason)
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		return chunks(len(p.IDs), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
			res, err := tx.ExecContext(ctx, `UPDATE `+s.idRows+` SET t.status = `+statusDead+
				`, t.last_error = ? WHERE t.status = `+statusPending, idsJSON(p.IDs[lo:hi]), reason)
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			n += k
			return err
		})
	})
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	return n, nil
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
	return tx.Commit()
}

// Purge implements stores.Store. It locks the oldest published rows with
// SKIP LOCKED, so purges running at once share the work instead of waiting
// for each other, and deletes them by primary key (see seqsJSON). MySQL
// takes neither LIMIT in an IN subquery nor a locking subquery on the table
// it deletes from, hence two statements in one READ COMMITTED transaction.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (n int64, err error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT seq FROM `+s.table+` FORCE INDEX (published)
			WHERE published_at < ? ORDER BY published_at LIMIT ? FOR UPDATE SKIP LOCKED`,
			dbTime(p.Before), p.Limit)
		if err != nil {
			return err
		}
		var seqs []uint64
		for rows.Next() {
			var seq uint64
			if err := rows.Scan(&seq); err != nil {
				_ = rows.Close()
				return err
			}
			seqs = append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return chunks(len(seqs), maxStatementRows, func(int) int { return 20 }, func(lo, hi int) error {
			res, err := tx.ExecContext(ctx, `DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT UNSIGNED PATH '$')) AS f
				STRAIGHT_JOIN `+s.table+` AS t FORCE INDEX (PRIMARY) ON t.seq = f.seq`, seqsJSON(seqs[lo:hi]))
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			n += k
			return err
		})
	})
	if err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}

// Blocked implements stores.Store. SCAFFOLD: replaced by the stats work.
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	return nil, errors.New("SCAFFOLD: Blocked not implemented")
}
