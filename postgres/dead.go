package postgres

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/stores"
)

// Dead implements stores.Store. Without p.IDs it reads the index of dead
// rows; with them, the rows by id.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	q := `SELECT ` + recordCols + ` FROM ` + s.nm.table + ` WHERE status = 2 AND ($1 = '' OR topic = $1)`
	args := []any{p.Topic, p.Limit}
	if len(p.IDs) > 0 {
		q += ` AND id = ANY($3)`
		args = append(args, p.IDs)
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY created_at, seq LIMIT $2`, args...)
	if err != nil {
		return nil, wrap("dead", err)
	}
	out, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, wrap("dead", err)
	}
	return out, nil
}

// Replay implements stores.Store.
func (s *Store) Replay(ctx context.Context, p stores.ReplayParams) (int64, error) {
	if p.IDs == nil {
		p.IDs = []uuid.UUID{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.nm.table+`
		SET status = 0, attempts = 0, available_at = $1
		WHERE status = 2 AND (cardinality($2::uuid[]) = 0 OR id = ANY($2)) AND ($3 = '' OR topic = $3)`,
		p.Now.UTC(), p.IDs, p.Topic)
	if err != nil {
		return 0, wrap("replay", err)
	}
	if tag.RowsAffected() > 0 && !s.cfg.DisableNotify {
		_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.nm.channel)
	}
	return tag.RowsAffected(), nil
}

// deadLetterSQL makes pending rows dead, keeping the last error beside the
// reason ($2; see stores.Store.DeadLetter).
const deadLetterSQL = ` SET status = 2, last_error = CASE
		WHEN $2::text = '' THEN last_error
		WHEN coalesce(last_error, '') = '' THEN $2::text
		ELSE $2::text || '; last error: ' || last_error END
	WHERE status = 0 AND id = ANY($1)`

// DeadLetter implements stores.Store. A record a relay holds right now is
// waited for (the claim ends within ClaimTimeout), then changed if still
// pending. A NUL or invalid UTF-8 in p.Reason, which text cannot hold, is
// stored as U+FFFD.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	reason := strings.ReplaceAll(strings.ToValidUTF8(p.Reason, "\uFFFD"), "\x00", "\uFFFD")
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.nm.table+deadLetterSQL, p.IDs, reason)
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	if tag.RowsAffected() > 0 && !s.cfg.DisableNotify {
		// The next record of each key may be due now.
		_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.nm.channel)
	}
	return tag.RowsAffected(), nil
}
