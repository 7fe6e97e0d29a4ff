package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/inboxtest"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/mysql"
)

func TestInboxConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness[*sql.Tx]{
		Setup: func(t *testing.T) inboxtest.Env[*sql.Tx] { return env(t, mysqltest.Open(t)) },
		Unmigrated: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newInbox(t, mysqltest.Open(t), nil, false)
		},
		New: func(table string) []error {
			_, err := mysql.New(nil, &mysql.Config{InboxTable: table})
			return []error{err}
		},
		// The inbox table's first migration: what migrations/001_inbox.up.sql
		// holds for the default name.
		SchemaSQL: func(table string) (string, error) {
			ms, err := mysql.Migrations(&mysql.Config{InboxTable: table})
			if err != nil {
				return "", err
			}
			if table == "" {
				table = mysql.DefaultInboxTable
			}
			for _, m := range ms {
				if m.Table == table && m.Version == 1 {
					return m.Up, nil
				}
			}
			return "", errors.New("no inbox migration 1")
		},
		// When several deliveries wait on a first that rolls back, InnoDB
		// fails all but one as deadlock victims (see the package
		// documentation).
		Transient: func(err error) bool {
			var myErr *mysqldrv.MySQLError
			return errors.As(err, &myErr) && myErr.Number == 1213
		},
	})
}

// env migrates the inbox in db and creates an effects table, whose seq
// records the order effects were applied in.
func env(t *testing.T, db *sql.DB) inboxtest.Env[*sql.Tx] {
	drv := newInbox(t, db, nil, true)
	if _, err := db.Exec(`CREATE TABLE effects (
		seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, msg_id BINARY(16) NOT NULL, note VARCHAR(64) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return inboxtest.Env[*sql.Tx]{
		Driver:  drv,
		Migrate: drv.Migrate,
		Apply: func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (msg_id, note) VALUES (?, ?)`, m.ID[:], string(m.Payload))
			return err
		},
		Effects: func(t *testing.T) []inboxtest.Effect {
			return inboxtest.Query(t, db, `SELECT msg_id, note FROM effects ORDER BY seq`, inboxtest.ScanEffect)
		},
		Records: func(t *testing.T) []inbox.Record {
			return inboxtest.Query(t, db, `SELECT id, topic, received_at FROM outbox_inbox`, inboxtest.ScanRecord)
		},
		// While the first delivery holds its record, an insert of the same
		// id in flight is one waiting on it. (MariaDB lists such waits
		// neither in INNODB_TRX nor in INNODB_LOCK_WAITS.)
		Waiting: func(ctx context.Context) (n int, err error) {
			err = db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
				WHERE DB = DATABASE() AND COMMAND <> 'Sleep' AND INFO LIKE 'INSERT INTO `+"`outbox_inbox`"+`%'`).Scan(&n)
			return n, err
		},
		// The shared lock that a duplicate's INSERT takes on the record.
		LockRecord: func(ctx context.Context, tx *sql.Tx, id uuid.UUID) error {
			_, err := tx.ExecContext(ctx, `SELECT id FROM outbox_inbox WHERE id = ? LOCK IN SHARE MODE`, id[:])
			return err
		},
		OtherTable: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newInbox(t, db, &mysql.Config{InboxTable: "billing_inbox"}, true)
		},
		Chain: func(t *testing.T) inboxtest.Chain[*sql.Tx] {
			d, err := mysql.New(db, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Store().Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[*sql.Tx]{Outbox: outbox.New(d, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, db, `SELECT CAST(payload AS CHAR) FROM outbox_messages`, inboxtest.ScanString)
			}}
		},
	}
}

// newInbox returns the inbox of cfg in db, its table migrated if migrate.
func newInbox(t *testing.T, db *sql.DB, cfg *mysql.Config, migrate bool) *mysql.Inbox {
	t.Helper()
	d, err := mysql.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	drv := d.Inbox()
	if migrate {
		if err := drv.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return drv
}
