package pginbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// PgxDriver is an inbox table used through pgx v5: inbox.New(driver) gives
// an *inbox.Inbox[pgx.Tx].
type PgxDriver struct {
	pool *pgxpool.Pool
	cfg  Config
	sql  statements
}

var _ inbox.Driver[pgx.Tx] = (*PgxDriver)(nil)

// NewPgx returns the pgx driver for the table cfg names (nil: outbox.inbox)
// in pool's database.
func NewPgx(pool *pgxpool.Pool, cfg *Config) (*PgxDriver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("pginbox: nil pool")
	}
	st, err := newStatements(c)
	if err != nil {
		return nil, err
	}
	return &PgxDriver{pool: pool, cfg: c, sql: st}, nil
}

// Config returns the driver's configuration with defaults applied.
func (d *PgxDriver) Config() Config { return d.cfg }

// Migrate creates the inbox table idempotently.
func (d *PgxDriver) Migrate(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, d.sql.migrate); err != nil {
		return fmt.Errorf("pginbox: migrate: %w", err)
	}
	return nil
}

// RunTx implements inbox.Driver.
func (d *PgxDriver) RunTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, fn)
}

// RecordTx implements inbox.Driver.
func (d *PgxDriver) RecordTx(ctx context.Context, tx pgx.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("pginbox: nil transaction")
	}
	tag, err := tx.Exec(ctx, d.sql.record, r.ID.String(), topicText(r.Topic), r.ReceivedAt.UTC())
	if err != nil {
		return false, wrap("record", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Purge implements inbox.Driver.
func (d *PgxDriver) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	tag, err := d.pool.Exec(ctx, d.sql.purge, before.UTC(), limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	return tag.RowsAffected(), nil
}

// SQLDriver is an inbox table used through database/sql: inbox.New(driver)
// gives an *inbox.Inbox[*sql.Tx]. It works with any PostgreSQL driver for
// database/sql (pgx's stdlib, lib/pq).
type SQLDriver struct {
	db  *sql.DB
	cfg Config
	sql statements
}

var _ inbox.Driver[*sql.Tx] = (*SQLDriver)(nil)

// NewSQL returns the database/sql driver for the table cfg names (nil:
// outbox.inbox) in db's database.
func NewSQL(db *sql.DB, cfg *Config) (*SQLDriver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pginbox: nil db")
	}
	st, err := newStatements(c)
	if err != nil {
		return nil, err
	}
	return &SQLDriver{db: db, cfg: c, sql: st}, nil
}

// Config returns the driver's configuration with defaults applied.
func (d *SQLDriver) Config() Config { return d.cfg }

// Migrate creates the inbox table idempotently.
func (d *SQLDriver) Migrate(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, d.sql.migrate); err != nil {
		return fmt.Errorf("pginbox: migrate: %w", err)
	}
	return nil
}

// RunTx implements inbox.Driver.
func (d *SQLDriver) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, d.db, "pginbox", fn)
}

// RecordTx implements inbox.Driver.
func (d *SQLDriver) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("pginbox: nil transaction")
	}
	res, err := tx.ExecContext(ctx, d.sql.record, r.ID.String(), topicText(r.Topic), r.ReceivedAt.UTC())
	if err != nil {
		return false, wrap("record", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrap("record", err)
	}
	return n == 1, nil
}

// Purge implements inbox.Driver.
func (d *SQLDriver) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := d.db.ExecContext(ctx, d.sql.purge, before.UTC(), limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	return res.RowsAffected()
}

// topicText makes a topic storable in the text column: valid UTF-8
// without NUL, both of which PostgreSQL refuses, each bad byte replaced by
// U+FFFD. The topic is for people reading the table; no message should
// fail for it.
func topicText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// wrap names the operation and marks a missing table.
func wrap(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return fmt.Errorf("%w: %w", inbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("pginbox: %s: %w", op, err)
}
