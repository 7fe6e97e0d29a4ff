package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/stores"
)

// Stats implements stores.Store in one statement: a scan of the table
// grouped by topic, each count a CASE of that one pass. Pending records
// whose available_at (NotBefore, then the next attempt's time) is at or
// before p.Now are due. Topics are told apart byte for byte: grouping by
// the length as well undoes the collation's PAD SPACE, which would take "a"
// and "a " for one topic.
func (s *Store) Stats(ctx context.Context, p stores.StatsParams) ([]stores.TopicStats, error) {
	const pending, due = `status = ` + statusPending, `status = ` + statusPending + ` AND available_at <= ?`
	now := dbTime(p.Now)
	rows, err := s.db.QueryContext(ctx, `SELECT topic,
		COUNT(CASE WHEN `+pending+` THEN 1 END),
		COUNT(CASE WHEN `+due+` THEN 1 END),
		COUNT(CASE WHEN `+pending+` AND attempts > 0 THEN 1 END),
		CAST(MIN(CASE WHEN `+pending+` THEN created_at END) AS CHAR),
		CAST(MIN(CASE WHEN `+due+` THEN created_at END) AS CHAR),
		COUNT(CASE WHEN status = `+statusDead+` THEN 1 END),
		COUNT(CASE WHEN status = `+statusPublished+` THEN 1 END)
		FROM `+s.table+` GROUP BY topic, LENGTH(topic) ORDER BY topic, LENGTH(topic)`, now, now)
	if err != nil {
		return nil, wrap("stats", err)
	}
	defer rows.Close()
	var out []stores.TopicStats
	for rows.Next() {
		var ts stores.TopicStats
		if err := rows.Scan(&ts.Topic, &ts.Pending, &ts.Due, &ts.Retrying,
			utcTime{&ts.OldestPending}, utcTime{&ts.OldestDue}, &ts.Dead, &ts.Published); err != nil {
			return nil, wrap("stats", err)
		}
		ts.Scheduled = ts.Pending - ts.Due
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
}

// blockedSQL lists blocked keys, the heads of keys found as the ordered
// claim finds them. For keys other than blank ones, a loose index scan of
// pending_keys, one index dive per key (see headsSQL), which groups keys
// equal but for trailing spaces as the claim does: "key <> ”", not
// "key > ”", since under PAD SPACE a key that starts with a byte below
// U+0020 (TAB, LF, ESC…) sorts below the empty key. For blank keys (spaces
// only, see blankClaimSQL), by length, reading the blank range of
// pending_keys, where unkeyed pending rows are too. Each head is read by
// primary key and kept when it failed at least once; the rows behind it are
// counted in pending_keys. No published or dead row is read. The payload is
// not read.
func blockedSQL(table string) string {
	cols := "t.id, t.topic, t.`key`, t.type, t.headers, CAST(t.created_at AS CHAR) AS created, " +
		"CAST(t.available_at AS CHAR), t.attempts, COALESCE(t.last_error, ''), t.seq"
	part := func(where, group, same string) string {
		return `SELECT ` + cols + `, (SELECT COUNT(*) FROM ` + table + ` AS b FORCE INDEX (pending_keys)
			WHERE b.status = ` + statusPending + " AND b.`key` = t.`key`" + same + `) - 1 AS behind
		FROM (SELECT MIN(seq) AS seq FROM ` + table + ` FORCE INDEX (pending_keys)
			WHERE status = ` + statusPending + where + ` GROUP BY ` + group + `) AS h
		STRAIGHT_JOIN ` + table + ` AS t FORCE INDEX (PRIMARY) ON t.seq = h.seq
		WHERE t.status = ` + statusPending + ` AND t.attempts > 0`
	}
	return `SELECT * FROM (` +
		part(" AND `key` <> ''", "status, `key`", "") +
		` UNION ALL ` +
		part(" AND `key` = '' AND LENGTH(`key`) > 0", "status, LENGTH(`key`)", " AND LENGTH(b.`key`) = LENGTH(t.`key`)") +
		`) AS x ORDER BY x.created, x.seq LIMIT ?`
}

// Blocked implements stores.Store in one statement (see blockedSQL).
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.db.QueryContext(ctx, blockedSQL(s.table), p.Limit)
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
			bk          stores.BlockedKey
			id, headers []byte
			seq         uint64
		)
		h := &bk.Head
		err := rows.Scan(&id, &h.Topic, &h.Key, &h.Type, &headers, utcTime{&h.CreatedAt}, utcTime{&bk.NextAttempt},
			&h.Attempts, &h.LastError, &seq, &bk.Behind)
		if err != nil {
			return nil, err
		}
		if h.ID, err = uuidFromBytes(id); err != nil {
			return nil, err
		}
		if len(headers) > 0 {
			if err := headerjson.Unmarshal(headers, &h.Headers); err != nil {
				return nil, fmt.Errorf("mysql: headers of %s: %w", h.ID, err)
			}
		}
		out = append(out, bk)
	}
	return out, rows.Err()
}
