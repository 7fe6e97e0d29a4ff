package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/stores"
)

// statsSQL is Stats' one statement over table t: a scan grouped by topic,
// each count a FILTER of that one pass. Pending rows whose available_at
// (NotBefore, then the next attempt's time) is at or before ?1 are due.
func statsSQL(t string) string {
	return `SELECT topic,
		count(*) FILTER (WHERE status = 0),
		count(*) FILTER (WHERE status = 0 AND available_at <= ?1),
		count(*) FILTER (WHERE status = 0 AND attempts > 0),
		min(created_at) FILTER (WHERE status = 0),
		min(created_at) FILTER (WHERE status = 0 AND available_at <= ?1),
		count(*) FILTER (WHERE status = 2),
		count(*) FILTER (WHERE status = 1)
		FROM ` + t + ` GROUP BY topic ORDER BY topic`
}

// Stats implements stores.Store, in one statement (see statsSQL).
func (s *Store) Stats(ctx context.Context, p stores.StatsParams) ([]stores.TopicStats, error) {
	rows, err := s.db.QueryContext(ctx, statsSQL(s.table()), p.Now.UnixMicro())
	if err != nil {
		return nil, wrap("stats", err)
	}
	defer rows.Close()
	var out []stores.TopicStats
	for rows.Next() {
		var ts stores.TopicStats
		var oldest, oldestDue sql.NullInt64
		if err := rows.Scan(&ts.Topic, &ts.Pending, &ts.Due, &ts.Retrying, &oldest, &oldestDue, &ts.Dead, &ts.Published); err != nil {
			return nil, wrap("stats", err)
		}
		ts.Scheduled = ts.Pending - ts.Due
		if oldest.Valid {
			ts.OldestPending = micros(oldest.Int64)
		}
		if oldestDue.Valid {
			ts.OldestDue = micros(oldestDue.Int64)
		}
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
}

// blockedSQL lists blocked keys of table t. It walks the heads of keys
// along the (key, seq) index of pending keyed rows: each step is one
// probe, the first entry past the last key, which is the next key's head
// (its lowest seq). It keeps the heads that failed at least once, oldest
// first, at most ?1, and counts the rows behind those. Its cost is one
// probe and one row read per pending key, whatever the size of the
// published history. Keys are the claim's: one key across every topic.
// The payload is not read.
func blockedSQL(t string) string {
	next := func(after string) string {
		return `(SELECT n.seq FROM ` + t + ` AS n WHERE n.status = 0 AND n.key <> ''` + after + ` ORDER BY n.key, n.seq LIMIT 1)`
	}
	return `WITH RECURSIVE heads(key, seq, attempts) AS (
		SELECT key, seq, attempts FROM ` + t + ` WHERE seq = ` + next("") + `
		UNION ALL
		SELECT m.key, m.seq, m.attempts FROM heads AS h JOIN ` + t + ` AS m ON m.seq = ` + next(" AND n.key > h.key") + `
	)
	SELECT m.id, m.topic, m.key, m.type, m.headers, m.created_at, m.available_at, m.attempts, coalesce(m.last_error, ''),
		(SELECT count(*) FROM ` + t + ` AS b WHERE b.status = 0 AND b.key <> '' AND b.key = m.key) - 1
	FROM heads AS h JOIN ` + t + ` AS m ON m.seq = h.seq
	WHERE h.attempts > 0
	ORDER BY m.created_at, m.seq LIMIT ?1`
}

// Blocked implements stores.Store, in one statement (see blockedSQL).
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.db.QueryContext(ctx, blockedSQL(s.table()), p.Limit)
	if err != nil {
		return nil, wrap("blocked", err)
	}
	out, err := scanBlocked(rows)
	if err != nil {
		return nil, wrap("blocked", err)
	}
	return out, nil
}

// scanBlocked reads blockedSQL's rows and closes rows.
func scanBlocked(rows *sql.Rows) ([]stores.BlockedKey, error) {
	defer rows.Close()
	var out []stores.BlockedKey
	for rows.Next() {
		var (
			bk            stores.BlockedKey
			id            []byte
			headers       sql.NullString
			created, next int64
		)
		h := &bk.Head
		err := rows.Scan(&id, &h.Topic, &h.Key, &h.Type, &headers, &created, &next, &h.Attempts, &h.LastError, &bk.Behind)
		if err != nil {
			return nil, err
		}
		if h.ID, err = uuid.FromBytes(id); err != nil {
			return nil, fmt.Errorf("blocked head: id: %w", err)
		}
		if headers.Valid {
			if err := headerjson.Unmarshal([]byte(headers.String), &h.Headers); err != nil {
				return nil, fmt.Errorf("blocked head %s: headers: %w", h.ID, err)
			}
		}
		h.CreatedAt, bk.NextAttempt = micros(created), micros(next)
		out = append(out, bk)
	}
	return out, rows.Err()
}
