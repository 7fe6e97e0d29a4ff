package sqliteinbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Driver is an inbox table in a SQLite database, used through database/sql:
// inbox.New(driver) gives an *inbox.Inbox[*sql.Tx]. It works with any SQLite
// driver for database/sql; stores/sqlite's Open sets what it relies on.
type Driver struct {
	db  *sql.DB
	cfg Config
	sql statements
}

var _ inbox.Driver[*sql.Tx] = (*Driver)(nil)

// New returns the driver for the table cfg names (nil: outbox_inbox) in db.
// db stays the caller's to close.
func New(db *sql.DB, cfg *Config) (*Driver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("sqliteinbox: nil db")
	}
	st, err := newStatements(c)
	if err != nil {
		return nil, err
	}
	return &Driver{db: db, cfg: c, sql: st}, nil
}

// Config returns the driver's configuration with defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// Migrate creates the inbox table idempotently, in one BEGIN IMMEDIATE
// transaction, so that consumers starting together do not race each other's
// CREATE statements.
func (d *Driver) Migrate(ctx context.Context) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqliteinbox: migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("sqliteinbox: migrate: %w", err)
	}
	if _, err = conn.ExecContext(ctx, d.sql.migrate); err == nil {
		if _, err = conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err == nil {
			return nil
		}
	}
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		// Still in a transaction, or not: do not give the connection back.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return fmt.Errorf("sqliteinbox: migrate: %w", err)
}

// RunTx implements inbox.Driver. With stores/sqlite's Open the transaction
// is BEGIN IMMEDIATE: it takes SQLite's write lock at once, waiting for the
// writer before it (under the busy timeout).
func (d *Driver) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, d.db, "sqliteinbox", fn)
}

// RecordTx implements inbox.Driver: one INSERT … ON CONFLICT (id) DO
// NOTHING; one row affected means the message is new.
func (d *Driver) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("sqliteinbox: nil transaction")
	}
	res, err := tx.ExecContext(ctx, d.sql.record, r.ID[:], r.Topic, r.ReceivedAt.UnixMicro())
	if err != nil {
		return false, wrap("record", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrap("record", err)
	}
	return n == 1, nil
}

// Purge implements inbox.Driver. SQLite has one writer: concurrent purges
// take turns, each one short statement of at most limit rows.
func (d *Driver) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := d.db.ExecContext(ctx, d.sql.purge, before.UnixMicro(), limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}

// wrap names the operation and marks a missing table. SQLite reports one as
// a plain SQLITE_ERROR, so the message is all there is.
func wrap(op string, err error) error {
	if strings.Contains(err.Error(), "no such table") {
		return fmt.Errorf("%w: %w", inbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("sqliteinbox: %s: %w", op, err)
}
