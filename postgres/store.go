package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

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
