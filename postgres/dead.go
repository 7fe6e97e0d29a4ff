package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/stores"
)

// deadQuery is the WHERE clause of Dead and DeadCount for p's filters,
// with its arguments; arg adds one more and returns its placeholder.
type deadQuery struct {
	where string
	args  []any
}

func (q *deadQuery) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func newDeadQuery(p stores.DeadParams) *deadQuery {
	q := &deadQuery{where: ` WHERE status = 2`}
	if len(p.IDs) > 0 {
		q.where += ` AND id = ANY(` + q.arg(p.IDs) + `)`
	}
	if p.Topic != "" {
		q.where += ` AND topic = ` + q.arg(p.Topic)
	}
	if p.Key != "" {
		q.where += ` AND key = ` + q.arg(p.Key)
	}
	if !p.CreatedBefore.IsZero() {
		q.where += ` AND created_at < ` + q.arg(p.CreatedBefore.UTC())
	}
	return q
}

// Dead implements stores.Store. Without p.IDs it reads the index of dead
// rows in list order ((created_at, id), or (topic, created_at) for one
// topic); with them, the rows by id.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	q := newDeadQuery(p)
	if p.After != nil {
		q.where += ` AND (created_at, id) > (` + q.arg(p.After.CreatedAt.UTC()) + `, ` + q.arg(p.After.ID) + `)`
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordCols+` FROM `+s.nm.table+q.where+
		` ORDER BY created_at, id LIMIT `+q.arg(p.Limit), q.args...)
	if err != nil {
		return nil, wrap("dead", err)
	}
	out, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, wrap("dead", err)
	}
	return out, nil
}

// DeadCount implements stores.Store, over the same indexes as Dead.
func (s *Store) DeadCount(ctx context.Context, p stores.DeadParams) (int64, error) {
	q := newDeadQuery(p)
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.nm.table+q.where, q.args...).Scan(&n); err != nil {
		return 0, wrap("dead count", err)
	}
	return n, nil
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

// Discard implements stores.Store: one statement, the rows found by id.
func (s *Store) Discard(ctx context.Context, p stores.DiscardParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.nm.table+` WHERE status = 2 AND id = ANY($1)`, p.IDs)
	if err != nil {
		return 0, wrap("discard", err)
	}
	return tag.RowsAffected(), nil
}
