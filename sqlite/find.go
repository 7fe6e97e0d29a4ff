package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/stores"
)

var _ stores.Finder = (*Store)(nil)

// foundCols are what Find scans, in its order: a record without its
// payload, its status and its available_at.
const foundCols = `seq, id, topic, key, type, headers, created_at, available_at, attempts, coalesce(last_error, ''), status`

// Find implements stores.Finder: by id through the table's unique index;
// by key through the index of pending keyed rows, and the dead rows.
func (s *Store) Find(ctx context.Context, p stores.FindParams) ([]stores.Found, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	t := s.table()
	var rows *sql.Rows
	var err error
	if p.ID != uuid.Nil {
		rows, err = s.db.QueryContext(ctx, `SELECT `+foundCols+` FROM `+t+` WHERE id = ?1`, p.ID[:])
	} else {
		rows, err = s.db.QueryContext(ctx, `SELECT * FROM (
			SELECT * FROM (SELECT `+foundCols+` FROM `+t+` WHERE status = 0 AND key = ?1 AND key <> '' ORDER BY key, seq LIMIT ?2)
			UNION ALL
			SELECT * FROM (SELECT `+foundCols+` FROM `+t+` WHERE status = 2 AND key = ?1 ORDER BY seq LIMIT ?2)
		) ORDER BY seq LIMIT ?2`, p.Key, p.Limit)
	}
	if err != nil {
		return nil, wrap("find", err)
	}
	out, err := scanFound(rows)
	if err != nil {
		return nil, wrap("find", err)
	}
	return out, nil
}

func scanFound(rows *sql.Rows) ([]stores.Found, error) {
	defer rows.Close()
	var out []stores.Found
	for rows.Next() {
		var (
			f                           stores.Found
			id                          []byte
			headers                     sql.NullString
			seq, created, available, at int64
			status                      int
		)
		err := rows.Scan(&seq, &id, &f.Topic, &f.Key, &f.Type, &headers, &created, &available, &at, &f.LastError, &status)
		if err != nil {
			return nil, err
		}
		if f.ID, err = uuid.FromBytes(id); err != nil {
			return nil, fmt.Errorf("row %d: id: %w", seq, err)
		}
		if headers.Valid {
			if err := headerjson.Unmarshal([]byte(headers.String), &f.Headers); err != nil {
				return nil, fmt.Errorf("row %d: headers: %w", seq, err)
			}
		}
		f.Attempts = int(at)
		f.CreatedAt = micros(created)
		if available > created && at == 0 {
			f.NotBefore = micros(available)
		}
		f.State = stores.State(status) // 0 pending, 1 published, 2 dead: the same numbers
		if f.State == stores.StatePending {
			f.DueAt = micros(available)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
