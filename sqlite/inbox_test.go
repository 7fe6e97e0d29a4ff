package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/inboxtest"
	"github.com/outboxgo/outbox/sqlite"
)

func TestInboxConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness[*sql.Tx]{
		Setup: inboxSetup,
		Unmigrated: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newInbox(t, openInbox(t), nil, false)
		},
		New: func(table string) []error {
			_, err := sqlite.New(nil, &sqlite.Config{InboxTable: table})
			return []error{err}
		},
		SchemaSQL: inboxSchemaSQL,
	})
}

// inboxSchemaSQL is the inbox table's first migration for table ("": the
// default), which migrations/001_inbox.up.sql must equal.
func inboxSchemaSQL(table string) (string, error) {
	ms, err := sqlite.Migrations(&sqlite.Config{InboxTable: table})
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.Name == "inbox" && m.Version == 1 {
			return m.Up, nil
		}
	}
	return "", errors.New("no migration 001_inbox")
}

// inboxSetup opens a fresh database file, migrates the inbox and creates an
// effects table.
func inboxSetup(t *testing.T) inboxtest.Env[*sql.Tx] {
	db := openInbox(t)
	drv := newInbox(t, db, nil, true)
	if _, err := db.Exec(`CREATE TABLE effects (id BLOB NOT NULL, note TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return inboxtest.Env[*sql.Tx]{
		Driver:  drv,
		Migrate: drv.Migrate,
		Apply: func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (id, note) VALUES (?, ?)`, m.ID[:], string(m.Payload))
			return err
		},
		Effects: func(t *testing.T) []inboxtest.Effect {
			return inboxtest.Query(t, db, `SELECT id, note FROM effects ORDER BY rowid`, inboxtest.ScanEffect)
		},
		Records: func(t *testing.T) []inbox.Record {
			// received_at is microseconds since the epoch.
			return inboxtest.Query(t, db, `SELECT id, topic, received_at FROM outbox_inbox`, func(rows *sql.Rows) (r inbox.Record, err error) {
				var at int64
				err = rows.Scan(&r.ID, &r.Topic, &at)
				r.ReceivedAt = time.UnixMicro(at).UTC()
				return r, err
			})
		},
		// SQLite has one writer, taken at BEGIN IMMEDIATE: while the first
		// delivery's transaction is open, every other connection in use
		// is a delivery waiting for it.
		Waiting: func(context.Context) (int, error) { return db.Stats().InUse - 1, nil },
		OtherTable: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newInbox(t, db, &sqlite.Config{InboxTable: "billing_inbox"}, true)
		},
		Chain: func(t *testing.T) inboxtest.Chain[*sql.Tx] {
			d, err := sqlite.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Store().Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[*sql.Tx]{Outbox: outbox.New(d, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, db, `SELECT CAST(payload AS TEXT) FROM outbox_messages`, inboxtest.ScanString)
			}}
		},
	}
}

func openInbox(t *testing.T) *sql.DB {
	t.Helper()
	return open(t, filepath.Join(t.TempDir(), "inbox.db"))
}

func newInbox(t *testing.T, db *sql.DB, cfg *sqlite.Config, migrate bool) *sqlite.Inbox {
	t.Helper()
	d, err := sqlite.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := d.Inbox()
	if migrate {
		if err := in.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return in
}
