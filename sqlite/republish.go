package sqlite

import (
	"context"
	"fmt"

	"github.com/outboxgo/outbox/stores"
)

// republishSQL makes the published rows of table t created in [?2, ?3),
// of topic ?4 and key ?5 (any when empty), pending again, due at ?1: the
// oldest ?6 of them. It reads the published index from ?2 on: a row
// created at or after ?2 was published at or after it too.
func republishSQL(t string) string {
	return `UPDATE ` + t + ` SET status = 0, attempts = 0, available_at = ?1, published_at = NULL,
			claim_token = NULL, locked_until = 0
		WHERE seq IN (SELECT seq FROM ` + t + `
			WHERE status = 1 AND published_at >= ?2 AND created_at >= ?2 AND created_at < ?3
				AND (?4 = '' OR topic = ?4) AND (?5 = '' OR key = ?5)
			ORDER BY created_at, id LIMIT ?6)`
}

// Republish implements stores.Store, in one statement. The relay finds the
// records at its next poll.
func (s *Store) Republish(ctx context.Context, p stores.RepublishParams) (int64, error) {
	if !p.From.Before(p.To) {
		return 0, fmt.Errorf("sqlite: republish: the range [%s, %s) is empty", p.From, p.To)
	}
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	n, err := s.write(ctx, republishSQL(s.table()), p.Now.UnixMicro(), p.From.UnixMicro(), p.To.UnixMicro(),
		p.Topic, p.Key, p.Limit)
	if err != nil {
		return 0, wrap("republish", err)
	}
	return n, nil
}
