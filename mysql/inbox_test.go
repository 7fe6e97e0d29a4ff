package mysqlinbox_test

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
	"github.com/outboxgo/outbox/mysql/mysqlinbox"
)

func TestConformance(t *testing.T) {
	inboxtest.Run(t, inboxtest.Harness[*sql.Tx]{
		Setup: func(t *testing.T) inboxtest.Env[*sql.Tx] { return env(t, mysqltest.Open(t)) },
		Unmigrated: func(t *testing.T) inbox.Driver[*sql.Tx] {
			return newDriver(t, mysqltest.Open(t), nil, false)
		},
		New: func(table string) []error {
			_, err := mysqlinbox.New(nil, &mysqlinbox.Config{Table: table})
			return []error{err}
		},
		SchemaSQL: func(table string) (string, error) {
			return mysqlinbox.SchemaSQL(&mysqlinbox.Config{Table: table})
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
	drv := newDriver(t, db, nil, true)
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
			return newDriver(t, db, &mysqlinbox.Config{Table: "billing_inbox"}, true)
		},
		Chain: func(t *testing.T) inboxtest.Chain[*sql.Tx] {
			if err := mysql.Migrate(context.Background(), db, nil); err != nil {
				t.Fatal(err)
			}
			od, err := mysql.NewDriver(nil)
			if err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[*sql.Tx]{Outbox: outbox.New(od, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, db, `SELECT CAST(payload AS CHAR) FROM outbox_messages`, inboxtest.ScanString)
			}}
		},
	}
}

func newDriver(t *testing.T, db *sql.DB, cfg *mysqlinbox.Config, migrate bool) *mysqlinbox.Driver {
	t.Helper()
	drv, err := mysqlinbox.New(db, cfg)
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
