package mysql

import (
	"database/sql"
	"errors"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// DB is the outbox in one MySQL or MariaDB database, over database/sql with
// github.com/go-sql-driver/mysql: the write side (InsertTx, so
// outbox.New(db) gives an *outbox.Outbox[*sql.Tx]), the relay's store
// (Store) and the consumer's inbox (Inbox), with the migrations of their
// tables (Migrate).
type DB struct {
	db    *sql.DB
	cfg   Config
	store *Store
	inbox *Inbox
	migs  []tableMigrations // the outbox table's, then the inbox table's
	// tableLock is how long each statement of a migration waits for a
	// table, and how often it is tried (see runStep).
	tableLock sqlkit.TableLock
	// The write side's statements, built once.
	table, keysTable string
	insert1, lock1   string // for one row and one key, the common case
}

var (
	_ outbox.Driver[*sql.Tx] = (*DB)(nil)
	_ stores.Store           = (*Store)(nil)
	_ inbox.Driver[*sql.Tx]  = (*Inbox)(nil)
)

// New returns the outbox of the tables cfg names (nil: the defaults) in
// the database db connects to. db stays the caller's to close.
func New(db *sql.DB, cfg *Config) (*DB, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("mysql: nil *sql.DB")
	}
	migs, err := loadMigrations(c)
	if err != nil {
		return nil, err
	}
	d := &DB{db: db, cfg: c, migs: migs, table: c.quotedTable(), keysTable: c.quotedKeysTable(), tableLock: sqlkit.DefaultTableLock}
	d.insert1, d.lock1 = insertSQL(d.table, 1), keyLockSQL(d.keysTable, 1)
	d.store = newStore(d)
	d.inbox = newInbox(d)
	return d, nil
}

// Config returns the configuration with defaults applied.
func (d *DB) Config() Config { return d.cfg }

// Store returns the relay's side of the outbox table, which implements
// stores.Store. It is the same Store on every call.
func (d *DB) Store() *Store { return d.store }

// Inbox returns the inbox table, which implements inbox.Driver[*sql.Tx]:
// inbox.New(db.Inbox(), nil) gives an *inbox.Inbox[*sql.Tx]. It is the
// same Inbox on every call.
func (d *DB) Inbox() *Inbox { return d.inbox }
