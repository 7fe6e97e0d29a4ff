package mysql

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// topicFilter matches t.topic exactly: the collation (utf8mb4_bin) ignores
// trailing spaces, comparing the byte lengths too does not.
const topicFilter = ` AND t.topic = ? AND LENGTH(t.topic) = ?`

// recordColsT is recordCols of the table aliased t.
const recordColsT = "t.id, t.topic, t.`key`, t.type, t.payload, t.headers, CAST(t.created_at AS CHAR), " +
	"CAST(t.available_at AS CHAR), t.attempts, COALESCE(t.last_error, '')"

// distinct returns ids without repeats (JSON_TABLE would repeat a row named
// twice), in their first order.
func distinct(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// keyFilter matches t.key exactly, as topicFilter does t.topic.
const keyFilter = " AND t.`key` = ? AND LENGTH(t.`key`) = ?"

// deadFrom is the FROM and WHERE clauses of Dead and DeadCount for p's
// filters, and their arguments. With p.IDs it looks the rows up by id (see
// sqlkit.IDsJSON).
func (s *Store) deadFrom(p stores.DeadParams) (string, []any) {
	q := ` FROM ` + s.table + ` AS t WHERE t.status = ` + statusDead
	var args []any
	if len(p.IDs) > 0 {
		q = ` FROM ` + s.idRows + ` WHERE t.status = ` + statusDead
		args = append(args, sqlkit.IDsJSON(distinct(p.IDs)))
	}
	if p.Topic != "" {
		q += topicFilter
		args = append(args, p.Topic, len(p.Topic))
	}
	if p.Key != "" {
		q += keyFilter
		args = append(args, p.Key, len(p.Key))
	}
	if !p.CreatedBefore.IsZero() {
		q += ` AND t.created_at < ?`
		args = append(args, dbTime(p.CreatedBefore))
	}
	return q, args
}

// Dead implements stores.Store. Without p.IDs it reads the dead list's
// index (status, created_at, id) in list order; with them, the rows by id.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	q, args := s.deadFrom(p)
	if p.After != nil {
		at := dbTime(p.After.CreatedAt)
		q += ` AND (t.created_at > ? OR (t.created_at = ? AND t.id > ?))`
		args = append(args, at, at, p.After.ID[:])
	}
	out, err := queryRecords(ctx, s.db, `SELECT `+recordColsT+q+` ORDER BY t.created_at, t.id LIMIT ?`, append(args, p.Limit)...)
	if err != nil {
		return nil, wrap("dead", err)
	}
	return out, nil
}

// DeadCount implements stores.Store, over the same indexes as Dead.
func (s *Store) DeadCount(ctx context.Context, p stores.DeadParams) (int64, error) {
	q, args := s.deadFrom(p)
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*)`+q, args...).Scan(&n); err != nil {
		return 0, wrap("dead count", err)
	}
	return n, nil
}

// Replay implements stores.Store. It runs READ COMMITTED, like every
// locking statement of the store: under REPEATABLE READ its scan of the dead
// rows would lock the gaps between them, where a relay's Complete inserts
// the rows it declares dead, and the two would deadlock. Named rows are
// looked up by id (see sqlkit.IDsJSON), the others read from the dead range
// of the pending index.
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
			return exec(`UPDATE `+s.idRows+set, append([]any{sqlkit.IDsJSON(p.IDs[lo:hi])}, args...)...)
		})
	})
	if err != nil {
		return 0, wrap("replay", err)
	}
	return n, nil
}

// deadLetterSQL makes the pending rows named by the first parameter dead,
// keeping each one's last error beside the reason (the other four; see
// stores.Store.DeadLetter). The joined text is cut to what last_error
// holds: when it is longer than maxErrorLen bytes, to its first 16,383
// characters (at most 4 bytes each). Without a reason, the last error
// stays as it was.
func (s *Store) deadLetterSQL(reason bool) string {
	set := ` SET t.status = ` + statusDead
	if reason {
		joined := `CONCAT(?, '; last error: ', t.last_error)`
		set += `, t.last_error = CASE
			WHEN COALESCE(LENGTH(t.last_error), 0) = 0 THEN ?
			WHEN LENGTH(` + joined + `) <= ` + strconv.Itoa(maxErrorLen) + ` THEN ` + joined + `
			ELSE LEFT(` + joined + `, ` + strconv.Itoa(maxErrorLen/4) + `) END`
	}
	return `UPDATE ` + s.idRows + set + ` WHERE t.status = ` + statusPending
}

// DeadLetter implements stores.Store: one statement (per 10,000 ids) in a
// READ COMMITTED transaction, the rows looked up by id (see
// sqlkit.IDsJSON). A record a relay holds right now is waited for (the
// claim ends within ClaimTimeout), then changed if still pending.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (n int64, err error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	reason := errText(p.Reason)
	q := s.deadLetterSQL(reason != "")
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		return chunks(len(p.IDs), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
			args := []any{sqlkit.IDsJSON(distinct(p.IDs[lo:hi]))}
			if reason != "" {
				args = append(args, reason, reason, reason, reason)
			}
			res, err := tx.ExecContext(ctx, q, args...)
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

// Discard implements stores.Store: one statement (per 10,000 ids) in a
// READ COMMITTED transaction, the rows looked up by id (see
// sqlkit.IDsJSON).
func (s *Store) Discard(ctx context.Context, p stores.DiscardParams) (n int64, err error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		return chunks(len(p.IDs), maxStatementRows, func(int) int { return 35 }, func(lo, hi int) error {
			res, err := tx.ExecContext(ctx, `DELETE t FROM `+s.idRows+` WHERE t.status = `+statusDead,
				sqlkit.IDsJSON(distinct(p.IDs[lo:hi])))
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			n += k
			return err
		})
	})
	if err != nil {
		return 0, wrap("discard", err)
	}
	return n, nil
}
