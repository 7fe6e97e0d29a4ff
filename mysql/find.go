package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/stores"
)

var _ stores.Finder = (*Store)(nil)

// foundColsT are what Find scans: the row's status, seq and available_at,
// then recordCols of the table aliased t with an empty payload (Find is a
// status query).
const foundColsT = "t.status, t.seq, CAST(t.available_at AS CHAR) AS due, " +
	"t.id, t.topic, t.`key`, t.type, '' AS payload, t.headers, CAST(t.created_at AS CHAR), " +
	"CAST(t.available_at AS CHAR), t.attempts, COALESCE(t.last_error, '')"

// Find implements stores.Finder: by id through the table's unique index;
// by key through the pending_keys index, and the dead rows.
func (s *Store) Find(ctx context.Context, p stores.FindParams) ([]stores.Found, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	var (
		q    string
		args []any
	)
	if p.ID != uuid.Nil {
		q = `SELECT ` + foundColsT + ` FROM ` + s.table + ` AS t WHERE t.id = ?`
		args = []any{p.ID[:]}
	} else {
		q = `SELECT * FROM (
			(SELECT ` + foundColsT + ` FROM ` + s.table + ` AS t WHERE t.status = ` + statusPending + keyFilter + " AND t.`key` <> '' ORDER BY t.seq LIMIT ?)" + `
			UNION ALL
			(SELECT ` + foundColsT + ` FROM ` + s.table + ` AS t WHERE t.status = ` + statusDead + keyFilter + ` ORDER BY t.seq LIMIT ?)
		) AS f ORDER BY seq LIMIT ?`
		args = []any{p.Key, len(p.Key), p.Limit, p.Key, len(p.Key), p.Limit, p.Limit}
	}
	var out []stores.Found
	err := scanRecords(ctx, s.db, q, args, func(rows *sql.Rows) error {
		var (
			f      stores.Found
			status int
			seq    uint64
			due    time.Time
		)
		if err := scanRecord(rows, &f.Record, &status, &seq, utcTime{&due}); err != nil {
			return err
		}
		f.Payload = nil
		switch status {
		case 1: // statusPublished
			f.State = stores.StatePublished
		case 2: // statusDead
			f.State = stores.StateDead
		default:
			f.State, f.DueAt = stores.StatePending, due
		}
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, wrap("find", err)
	}
	return out, nil
}
