package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Store is the relay side of a PostgreSQL outbox, over a pgx pool. It
// implements stores.Store and stores.Listener.
type Store struct {
	pool   *pgxpool.Pool
	cfg    Config
	nm     names
	cursor keyCursor
}

var (
	_ stores.Store    = (*Store)(nil)
	_ stores.Listener = (*Store)(nil)
)

// New returns the store for the table cfg names (nil: outbox.messages). The
// pool stays the caller's to close.
func New(pool *pgxpool.Pool, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool, cfg: c, nm: c.names()}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// ClaimsInTx implements stores.TxClaimer: a claim is a pgx.Tx that
// in-process handlers join (see batch.RunInTx).
func (s *Store) ClaimsInTx(pgx.Tx) {}

// Migrate implements stores.Store.
func (s *Store) Migrate(ctx context.Context) error {
	q, err := migrateSQL(s.cfg)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, q); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}

// CheckSchema returns ErrSchemaMissing (wrapped) unless the table exists.
func (s *Store) CheckSchema(ctx context.Context) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.nm.table).Scan(&ok)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: table %s.%s not found", outbox.ErrSchemaMissing, s.cfg.Schema, s.cfg.Table)
	}
	return nil
}

// wrap names the operation and turns a missing table into ErrSchemaMissing.
func wrap(op string, err error) error {
	if isSchemaMissing(err) {
		return fmt.Errorf("postgres: %s: %w: %w", op, outbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// Stats implements stores.Store.
func (s *Store) Stats(ctx context.Context, _ stores.StatsParams) ([]stores.TopicStats, error) {
	rows, err := s.pool.Query(ctx, `SELECT topic,
		count(*) FILTER (WHERE status = 0),
		min(created_at) FILTER (WHERE status = 0),
		count(*) FILTER (WHERE status = 2),
		count(*) FILTER (WHERE status = 1)
		FROM `+s.nm.table+` GROUP BY topic ORDER BY topic`)
	if err != nil {
		return nil, wrap("stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stores.TopicStats, error) {
		var ts stores.TopicStats
		var oldest *time.Time
		err := r.Scan(&ts.Topic, &ts.Pending, &oldest, &ts.Dead, &ts.Published)
		if oldest != nil {
			ts.OldestPending = *oldest
		}
		return ts, err
	})
	if err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
}

const recordCols = `id, topic, key, type, payload, headers, created_at, available_at, attempts, coalesce(last_error, '')`

func scanRecord(r pgx.CollectableRow) (stores.Record, error) {
	var rec stores.Record
	var available time.Time
	err := r.Scan(&rec.ID, &rec.Topic, &rec.Key, &rec.Type, &rec.Payload, &rec.Headers,
		&rec.CreatedAt, &available, &rec.Attempts, &rec.LastError)
	if available.After(rec.CreatedAt) && rec.Attempts == 0 {
		rec.NotBefore = available
	}
	return rec, err
}

// Dead implements stores.Store.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+recordCols+` FROM `+s.nm.table+`
		WHERE status = 2 AND ($1 = '' OR topic = $1) ORDER BY created_at, seq LIMIT $2`, p.Topic, p.Limit)
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

// DeadLetter implements stores.Store. A record a relay holds right now is
// waited for (the claim ends within ClaimTimeout), then changed if still
// pending.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE `+s.nm.table+` SET status = 2, last_error = $2
		WHERE status = 0 AND id = ANY($1)`, p.IDs, p.Reason)
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	if tag.RowsAffected() > 0 && !s.cfg.DisableNotify {
		// The next record of each key may be due now.
		_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, '')`, s.nm.channel)
	}
	return tag.RowsAffected(), nil
}

// Purge implements stores.Store. Rows another purge has locked are skipped,
// so relays purging at once share the work instead of deadlocking.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (int64, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.nm.table+` WHERE seq IN (
		SELECT seq FROM `+s.nm.table+` WHERE status = 1 AND published_at < $1
		ORDER BY published_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, p.Before.UTC(), p.Limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	return tag.RowsAffected(), nil
}

// errClosedBatch is returned by Complete on a batch already ended.
var errClosedBatch = errors.New("postgres: batch already completed or aborted")

// Blocked implements stores.Store. SCAFFOLD: replaced by the stats work.
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	return nil, errors.New("SCAFFOLD: Blocked not implemented")
}
