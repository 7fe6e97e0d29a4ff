package postgres

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// DB is the outbox backend on one pgx pool: enqueue (it is an
// outbox.Driver[pgx.Tx], so outbox.New(db, nil) gives an
// *outbox.Outbox[pgx.Tx]), the relay's store (Store) and the inbox (Inbox),
// on the tables its Config names.
type DB struct {
	pool  *pgxpool.Pool
	cfg   Config
	n     notifier
	mig   *migrator
	store *Store
	inbox *Inbox
}

var _ outbox.Driver[pgx.Tx] = (*DB)(nil)

// New returns the backend on pool for the tables cfg names (nil: the
// defaults). The pool stays the caller's to close. New does not touch the
// database: call Migrate to create or upgrade the tables.
func New(pool *pgxpool.Pool, cfg *Config) (*DB, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("postgres: nil pool")
	}
	mig, err := newMigrator(c)
	if err != nil {
		return nil, err
	}
	db := &DB{pool: pool, cfg: c, n: notifier{cfg: c}, mig: mig}
	db.store = &Store{pool: pool, cfg: c, nm: c.names(), mig: mig}
	db.inbox = &Inbox{pool: pool, mig: mig, sql: newInboxStatements(c)}
	return db, nil
}

// Config returns the configuration with defaults applied.
func (db *DB) Config() Config { return db.cfg }

// Store returns the relay's store of the outbox table.
func (db *DB) Store() *Store { return db.store }

// Inbox returns the inbox table's driver: inbox.New(db.Inbox(), nil) gives
// an *inbox.Inbox[pgx.Tx].
func (db *DB) Inbox() *Inbox { return db.inbox }

// InsertTx implements outbox.Driver: it writes msgs in tx, the caller's
// transaction, and (see Config.NotifyDebounce) notifies relays at commit.
func (db *DB) InsertTx(ctx context.Context, tx pgx.Tx, msgs []outbox.Message) error {
	if tx == nil {
		return outbox.ErrNoTransaction
	}
	return db.n.insert(msgs, func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	})
}

// Migrate brings the outbox and the inbox tables to the latest schema
// version (see the package doc, Migrations).
func (db *DB) Migrate(ctx context.Context) error {
	return db.mig.up(ctx, pgxBegin(db.pool), db.mig.outbox, db.mig.inbox)
}

// MigrateDown takes each table whose version is above to back to version
// to, running the down migrations in turn; 0 drops the tables (and every
// event and record in them). The schema is left alone.
func (db *DB) MigrateDown(ctx context.Context, to int) error {
	return db.mig.down(ctx, pgxBegin(db.pool), to)
}

// SchemaVersions reports each table's schema version, the outbox table's
// first.
func (db *DB) SchemaVersions(ctx context.Context) ([]SchemaVersion, error) {
	return db.mig.versions(ctx, pgxBegin(db.pool))
}

// SQLDB is the backend on a database/sql handle, for programs whose
// transactions are *sql.Tx, with any PostgreSQL driver for database/sql
// (pgx's stdlib, lib/pq): enqueue (it is an outbox.Driver[*sql.Tx]) and
// the inbox. The relay's store needs pgx (New); both work on the same
// tables, so a program can enqueue through database/sql and relay through
// pgx.
type SQLDB struct {
	db    *sql.DB
	cfg   Config
	n     notifier
	mig   *migrator
	inbox *SQLInbox
}

var _ outbox.Driver[*sql.Tx] = (*SQLDB)(nil)

// NewSQL returns the backend on db for the tables cfg names (nil: the
// defaults). db stays the caller's to close.
func NewSQL(db *sql.DB, cfg *Config) (*SQLDB, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("postgres: nil db")
	}
	mig, err := newMigrator(c)
	if err != nil {
		return nil, err
	}
	return &SQLDB{db: db, cfg: c, n: notifier{cfg: c}, mig: mig,
		inbox: &SQLInbox{db: db, mig: mig, sql: newInboxStatements(c)}}, nil
}

// Config returns the configuration with defaults applied.
func (db *SQLDB) Config() Config { return db.cfg }

// Inbox returns the inbox table's driver: inbox.New(db.Inbox(), nil) gives
// an *inbox.Inbox[*sql.Tx].
func (db *SQLDB) Inbox() *SQLInbox { return db.inbox }

// InsertTx implements outbox.Driver (see DB.InsertTx).
func (db *SQLDB) InsertTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	if tx == nil {
		return outbox.ErrNoTransaction
	}
	return db.n.insert(msgs, func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}

// Migrate brings the outbox and the inbox tables to the latest schema
// version, like DB.Migrate.
func (db *SQLDB) Migrate(ctx context.Context) error {
	return db.mig.up(ctx, sqlBegin(db.db), db.mig.outbox, db.mig.inbox)
}

// MigrateDown is DB.MigrateDown through database/sql.
func (db *SQLDB) MigrateDown(ctx context.Context, to int) error {
	return db.mig.down(ctx, sqlBegin(db.db), to)
}

// SchemaVersions is DB.SchemaVersions through database/sql.
func (db *SQLDB) SchemaVersions(ctx context.Context) ([]SchemaVersion, error) {
	return db.mig.versions(ctx, sqlBegin(db.db))
}

var (
	_ inbox.Driver[pgx.Tx]  = (*Inbox)(nil)
	_ inbox.Driver[*sql.Tx] = (*SQLInbox)(nil)
)
