package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/outboxgo/outbox/stores"
)

// Republish implements stores.Store: one statement in a READ COMMITTED
// transaction, like every locking statement of the store. It reads the
// published index from p.From on: a row created at or after p.From was
// published at or after it too, so the scan grows with what was published
// since.
func (s *Store) Republish(ctx context.Context, p stores.RepublishParams) (n int64, err error) {
	if !p.From.Before(p.To) {
		return 0, fmt.Errorf("mysql: republish: the range [%s, %s) is empty", p.From, p.To)
	}
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	q := `UPDATE ` + s.table + ` AS t FORCE INDEX (published)
		SET t.status = ` + statusPending + `, t.attempts = 0, t.available_at = ?, t.published_at = NULL
		WHERE t.published_at >= ? AND t.status = ` + statusPublished + ` AND t.created_at >= ? AND t.created_at < ?`
	from := dbTime(p.From)
	args := []any{dbTime(p.Now), from, from, dbTime(p.To)}
	if p.Topic != "" {
		q += topicFilter
		args = append(args, p.Topic, len(p.Topic))
	}
	if p.Key != "" {
		q += keyFilter
		args = append(args, p.Key, len(p.Key))
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q+` ORDER BY t.created_at, t.id LIMIT ?`, append(args, p.Limit)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, wrap("republish", err)
	}
	return n, nil
}
