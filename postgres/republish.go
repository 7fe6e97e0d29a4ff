package postgres

import (
	"context"
	"fmt"

	"github.com/outboxgo/outbox/stores"
)

// Republish implements stores.Store in one statement. It finds the rows by
// the published index: a row created at or after p.From was published at
// or after it too, so the scan starts at p.From and grows with what was
// published since. Rows a purge holds right now are skipped (they are
// going). Relays are woken by a NOTIFY.
func (s *Store) Republish(ctx context.Context, p stores.RepublishParams) (int64, error) {
	if !p.From.Before(p.To) {
		return 0, fmt.Errorf("postgres: republish: the range [%s, %s) is empty", p.From, p.To)
	}
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.nm.table+`
		SET status = 0, attempts = 0, available_at = $1, published_at = NULL
		WHERE seq IN (SELECT seq FROM `+s.nm.table+`
			WHERE status = 1 AND published_at >= $2 AND created_at >= $2 AND created_at < $3
				AND ($4 = '' OR topic = $4) AND ($5 = '' OR key = $5)
			ORDER BY created_at, id LIMIT $6 FOR UPDATE SKIP LOCKED)`,
		p.Now.UTC(), p.From.UTC(), p.To.UTC(), p.Topic, p.Key, p.Limit)
	if err != nil {
		return 0, wrap("republish", err)
	}
	if tag.RowsAffected() > 0 && !s.cfg.DisableNotify {
		_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.nm.channel)
	}
	return tag.RowsAffected(), nil
}
