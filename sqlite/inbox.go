package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Inbox is the inbox table, used through database/sql: (*DB).Inbox returns
// it, and inbox.New(db.Inbox(), nil) gives an *inbox.Inbox[*sql.Tx]. It
// works with any SQLite driver for database/sql; Open sets what it relies
// on.
//
// A record is one row (id, topic, received_at), inserted with INSERT … ON
// CONFLICT (id) DO NOTHING in the handler's transaction; the rows it
// affected (one or none) say whether the message is new.
type Inbox struct {
	d             *DB
	record, purge string
}

var _ inbox.Driver[*sql.Tx] = (*Inbox)(nil)

func newInbox(d *DB) *Inbox {
	t := quote(d.cfg.InboxTable)
	return &Inbox{
		d:      d,
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		purge: `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t +
			` WHERE received_at < ? ORDER BY received_at LIMIT ?)`,
	}
}

// Config returns the configuration with defaults applied.
func (in *Inbox) Config() Config { return in.d.cfg }

// Migrate brings the inbox table to its latest schema version, as
// Store.Migrate does the outbox table's, in one IMMEDIATE transaction, so
// that consumers starting together take turns.
func (in *Inbox) Migrate(ctx context.Context) error {
	return in.d.migrate(ctx, in.d.inboxSchema)
}

// RunTx implements inbox.Driver. On a handle from Open the transaction is
// BEGIN IMMEDIATE: it takes SQLite's write lock at once, waiting its turn
// behind the writers before it (see the package documentation, "Writers").
// A concurrent duplicate therefore waits until the first delivery's
// transaction ends, and then sees its record, or none if it rolled back.
func (in *Inbox) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, in.d.db, "sqlite: inbox", fn)
}

// RecordTx implements inbox.Driver: one INSERT … ON CONFLICT (id) DO
// NOTHING; one row affected means the message is new.
func (in *Inbox) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("sqlite: inbox: nil transaction")
	}
	res, err := tx.ExecContext(ctx, in.record, r.ID[:], r.Topic, r.ReceivedAt.UnixMicro())
	if err != nil {
		return false, wrapInbox("record", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrapInbox("record", err)
	}
	return n == 1, nil
}

// Purge implements inbox.Driver. SQLite has one writer: concurrent purges
// take turns, each one short statement of at most limit records, waiting
// for the write lock as the store's writes do (see the package
// documentation, "Writers").
func (in *Inbox) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	var n int64
	w := wait{until: time.Now().Add(maxLockWait), gate: in.d.gate}
	err := immediate(ctx, in.d.db, w, func(ctx context.Context, tx *wtx) error {
		res, err := tx.exec(ctx, in.purge, before.UnixMicro(), limit)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err != nil {
		return 0, wrapInbox("purge", err)
	}
	return n, nil
}
