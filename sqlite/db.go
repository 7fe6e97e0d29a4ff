package sqlite

import (
	"database/sql"
	"errors"

	"github.com/outboxgo/outbox"
)

// DB is the outbox and the inbox of one SQLite database: the write side
// (InsertTx: DB is an outbox.Driver[*sql.Tx], for outbox.New), the relay's
// store (Store) and the consumer's inbox (Inbox), over one database/sql
// handle, with the tables Config names.
type DB struct {
	db  *sql.DB
	cfg Config
	// gate queues the write transactions of the store, the inbox and the
	// migrations when db is not from Open (whose connections queue at
	// their file's gate); see lock.go.
	gate  *gate
	one   string // insertSQL for one row, the common case
	store *Store
	inbox *Inbox
	// The tables' numbered migrations, rendered for their names.
	outboxSchema, inboxSchema tableSchema
}

var _ outbox.Driver[*sql.Tx] = (*DB)(nil)

// New returns the outbox and inbox of db, with the tables cfg names (nil:
// outbox_messages and outbox_inbox). db stays the caller's to close; open it
// with Open, or with the settings Open documents. New touches nothing in the
// database: call Migrate to create or upgrade the tables.
func New(db *sql.DB, cfg *Config) (*DB, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("sqlite: New: nil *sql.DB")
	}
	ts, err := schemas(&c)
	if err != nil {
		return nil, err
	}
	d := &DB{db: db, cfg: c, gate: newGate(), one: insertSQL(quote(c.Table), 1),
		outboxSchema: ts[0], inboxSchema: ts[1]}
	d.store = &Store{d: d, db: db, cfg: c, q: newQueries(quote(c.Table), c.Table)}
	d.inbox = newInbox(d)
	return d, nil
}

// Config returns the configuration with defaults applied.
func (d *DB) Config() Config { return d.cfg }

// Store returns the relay's side of the outbox table: a stores.Store and a
// stores.Listener, for relay.New. Every call returns the same Store; for a
// second relay in one process, with a cursor of its own, call New again.
func (d *DB) Store() *Store { return d.store }

// Inbox returns the inbox table's driver: an inbox.Driver[*sql.Tx], for
// inbox.New. Every call returns the same Inbox.
func (d *DB) Inbox() *Inbox { return d.inbox }
