package sqliteinbox_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/inboxtest"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/sqlite/sqliteinbox"
)

func TestConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness[*sql.Tx]{
		Setup: setup,
		Unmigrated: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newDriver(t, open(t), nil, false)
		},
		New: func(table string) []error {
			_, err := sqliteinbox.New(nil, &sqliteinbox.Config{Table: table})
			return []error{err}
		},
		SchemaSQL: func(table string) (string, error) {
			return sqliteinbox.SchemaSQL(&sqliteinbox.Config{Table: table})
		},
	})
}

// setup opens a fresh database file, migrates the inbox and creates an
// effects table.
func setup(t *testing.T) inboxtest.Env[*sql.Tx] {
	db := open(t)
	drv := newDriver(t, db, nil, true)
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
			return newDriver(t, db, &sqliteinbox.Config{Table: "billing_inbox"}, true)
		},
		Chain: func(t *testing.T) inboxtest.Chain[*sql.Tx] {
			store, err := sqlite.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			od, err := sqlite.NewDriver(nil)
			if err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[*sql.Tx]{Outbox: outbox.New(od, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, db, `SELECT CAST(payload AS TEXT) FROM outbox_messages`, inboxtest.ScanString)
			}}
		},
	}
}

func open(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newDriver(t *testing.T, db *sql.DB, cfg *sqliteinbox.Config, migrate bool) *sqliteinbox.Driver {
	t.Helper()
	drv, err := sqliteinbox.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if migrate {
		if err := drv.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return drv
}
