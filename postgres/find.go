package postgres

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/stores"
)

var _ stores.Finder = (*Store)(nil)

// foundCols are what scanFound reads, in its order: a record without its
// payload, its status and its available_at.
const foundCols = `seq, id, topic, key, type, headers, created_at, available_at, attempts, coalesce(last_error, ''), status`

// Find implements stores.Finder: by id through the table's unique index;
// by key through the index of pending keyed rows, and the dead rows.
func (s *Store) Find(ctx context.Context, p stores.FindParams) ([]stores.Found, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var rows pgx.Rows
	var err error
	if p.ID != uuid.Nil {
		rows, err = s.pool.Query(ctx, `SELECT `+foundCols+` FROM `+s.nm.table+` WHERE id = $1`, p.ID)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT * FROM (
			(SELECT `+foundCols+` FROM `+s.nm.table+` WHERE status = 0 AND key = $1 AND key <> '' ORDER BY key, seq LIMIT $2)
			UNION ALL
			(SELECT `+foundCols+` FROM `+s.nm.table+` WHERE status = 2 AND key = $1 ORDER BY seq LIMIT $2)
		) AS f ORDER BY seq LIMIT $2`, p.Key, p.Limit)
	}
	if err != nil {
		return nil, wrap("find", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stores.Found, error) {
		var f stores.Found
		var seq int64
		var available time.Time
		var status int16
		err := r.Scan(&seq, uuidDst(&f.ID), &f.Topic, &f.Key, &f.Type, headerjson.Column(&f.Headers), &f.CreatedAt, &available,
			&f.Attempts, &f.LastError, &status)
		f.CreatedAt = f.CreatedAt.UTC()
		setNotBefore(&f.Record, available.UTC())
		f.State = stores.State(status) // 0 pending, 1 published, 2 dead: the same numbers
		if f.State == stores.StatePending {
			f.DueAt = available.UTC()
		}
		return f, err
	})
	if err != nil {
		return nil, wrap("find", err)
	}
	return out, nil
}
