package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/stores"
)

// Stats implements stores.Store in one statement: a scan of the table
// grouped by topic, each count a FILTER of that one pass. Pending records
// whose available_at (NotBefore, then the next attempt's time) is at or
// before p.Now are due.
func (s *Store) Stats(ctx context.Context, p stores.StatsParams) ([]stores.TopicStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT topic,
		count(*) FILTER (WHERE status = 0),
		count(*) FILTER (WHERE status = 0 AND available_at <= $1),
		count(*) FILTER (WHERE status = 0 AND attempts > 0),
		min(created_at) FILTER (WHERE status = 0),
		min(created_at) FILTER (WHERE status = 0 AND available_at <= $1),
		count(*) FILTER (WHERE status = 2),
		count(*) FILTER (WHERE status = 1)
		FROM `+s.nm.table+` GROUP BY topic ORDER BY topic`, p.Now.UTC())
	if err != nil {
		return nil, wrap("stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stores.TopicStats, error) {
		var ts stores.TopicStats
		var oldest, oldestDue *time.Time
		err := r.Scan(&ts.Topic, &ts.Pending, &ts.Due, &ts.Retrying, &oldest, &oldestDue, &ts.Dead, &ts.Published)
		ts.Scheduled = ts.Pending - ts.Due
		if oldest != nil {
			ts.OldestPending = oldest.UTC()
		}
		if oldestDue != nil {
			ts.OldestDue = oldestDue.UTC()
		}
		return ts, err
	})
	if err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
}

// blockedSQL lists blocked keys. It walks the heads of keys along the
// (key, seq) index of pending keyed rows: each step is one probe, the
// first entry past the last key, which is the next key's head (its lowest
// seq). It keeps the heads that failed at least once and counts the rows
// behind those. Its cost is one probe and one row read per pending key,
// whatever the size of the published history. Keys are the claim's: one
// key across every topic. The payload is not read.
func (s *Store) blockedSQL() string {
	t := s.nm.table
	return `WITH RECURSIVE heads(key, seq, attempts) AS (
		(SELECT key, seq, attempts FROM ` + t + ` WHERE status = 0 AND key <> '' ORDER BY key, seq LIMIT 1)
		UNION ALL
		SELECT n.key, n.seq, n.attempts FROM heads h CROSS JOIN LATERAL (SELECT m.key, m.seq, m.attempts FROM ` + t + ` m
			WHERE m.status = 0 AND m.key <> '' AND m.key > h.key ORDER BY m.key, m.seq LIMIT 1) n
	)
	SELECT m.id, m.topic, m.key, m.type, m.headers, m.created_at, m.available_at, m.attempts, coalesce(m.last_error, ''),
		(SELECT count(*) FROM ` + t + ` b WHERE b.status = 0 AND b.key <> '' AND b.key = m.key) - 1
	FROM heads h JOIN ` + t + ` m ON m.seq = h.seq
	WHERE h.attempts > 0
	ORDER BY m.created_at, m.seq
	LIMIT $1`
}

// Blocked implements stores.Store in one statement (see blockedSQL).
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.pool.Query(ctx, s.blockedSQL(), p.Limit)
	if err != nil {
		return nil, wrap("blocked", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stores.BlockedKey, error) {
		var bk stores.BlockedKey
		h := &bk.Head
		err := r.Scan(uuidDst(&h.ID), &h.Topic, &h.Key, &h.Type, headerjson.Column(&h.Headers), &h.CreatedAt, &bk.NextAttempt,
			&h.Attempts, &h.LastError, &bk.Behind)
		h.CreatedAt, bk.NextAttempt = h.CreatedAt.UTC(), bk.NextAttempt.UTC()
		return bk, err
	})
	if err != nil {
		return nil, wrap("blocked", err)
	}
	return out, nil
}
