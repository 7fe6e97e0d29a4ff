package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/inboxtest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

func TestInboxConformancePgx(t *testing.T) {
	inboxtest.Run(t, inboxHarness(variant[pgx.Tx]{
		driver: func(b *inboxBundle, cfg *postgres.Config) (inboxDriver[pgx.Tx], outbox.Driver[pgx.Tx], error) {
			db, err := postgres.New(b.pool, cfg)
			if err != nil {
				return nil, nil, err
			}
			return db.Inbox(), db, nil
		},
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
	}))
}

func TestInboxConformanceSQL(t *testing.T) {
	inboxtest.Run(t, inboxHarness(variant[*sql.Tx]{
		driver: func(b *inboxBundle, cfg *postgres.Config) (inboxDriver[*sql.Tx], outbox.Driver[*sql.Tx], error) {
			db, err := postgres.NewSQL(b.db, cfg)
			if err != nil {
				return nil, nil, err
			}
			return db.Inbox(), db, nil
		},
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
	}))
}

// inboxDriver is what DB.Inbox and SQLDB.Inbox return.
type inboxDriver[TTx any] interface {
	inbox.Driver[TTx]
	Migrate(ctx context.Context) error
}

// variant is what differs between the pgx and the database/sql backends.
type variant[TTx any] struct {
	// driver returns the inbox and the outbox of New or NewSQL.
	driver func(b *inboxBundle, cfg *postgres.Config) (inboxDriver[TTx], outbox.Driver[TTx], error)
	exec   func(ctx context.Context, tx TTx, q string, args ...any) error
}

// inboxBundle is a test's own schema: a pgx pool and a database/sql handle
// on the same database.
type inboxBundle struct {
	pool   *pgxpool.Pool
	db     *sql.DB
	schema string
}

func newInboxBundle(t *testing.T) *inboxBundle {
	t.Helper()
	pool := pgtest.Pool(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	return &inboxBundle{pool: pool, db: db, schema: pgtest.Schema(t, pool)}
}

func (v variant[TTx]) newDriver(t *testing.T, b *inboxBundle, table string, migrate bool) inboxDriver[TTx] {
	t.Helper()
	d, _, err := v.driver(b, &postgres.Config{Schema: b.schema, InboxTable: table})
	if err != nil {
		t.Fatal(err)
	}
	if migrate {
		if err := d.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func inboxHarness[TTx any](v variant[TTx]) inboxtest.Harness[TTx] {
	return inboxtest.Harness[TTx]{
		Setup: v.env,
		Unmigrated: func(t *testing.T) inbox.Driver[TTx] {
			return v.newDriver(t, newInboxBundle(t), "", false) // not even the schema exists
		},
		New: func(table string) []error {
			_, _, err := v.driver(&inboxBundle{}, &postgres.Config{InboxTable: table})
			return []error{err}
		},
		SchemaSQL: inboxSchemaSQL,
	}
}

// inboxSchemaSQL is the inbox table's first migration for table ("": the
// default), which migrations/001_inbox.up.sql must equal.
func inboxSchemaSQL(table string) (string, error) {
	ms, err := postgres.Migrations(&postgres.Config{InboxTable: table})
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

// env migrates the inbox (table "received") in a schema of the test's own
// and creates an effects table, whose seq records the order effects were
// applied in.
func (v variant[TTx]) env(t *testing.T) inboxtest.Env[TTx] {
	b := newInboxBundle(t)
	d := v.newDriver(t, b, "received", true)
	table := `"` + b.schema + `"."received"`
	effects := `"` + b.schema + `".effects`
	if _, err := b.db.Exec(`CREATE TABLE ` + effects + ` (seq bigserial PRIMARY KEY, msg_id uuid NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return inboxtest.Env[TTx]{
		Driver:  d,
		Migrate: d.Migrate,
		Apply: func(ctx context.Context, tx TTx, m inbox.Message) error {
			return v.exec(ctx, tx, `INSERT INTO `+effects+` (msg_id, note) VALUES ($1, $2)`, m.ID.String(), string(m.Payload))
		},
		Effects: func(t *testing.T) []inboxtest.Effect {
			return inboxtest.Query(t, b.db, `SELECT msg_id, note FROM `+effects+` ORDER BY seq`, inboxtest.ScanEffect)
		},
		Records: func(t *testing.T) []inbox.Record {
			return inboxtest.Query(t, b.db, `SELECT id, topic, received_at FROM `+table, inboxtest.ScanRecord)
		},
		// A delivery whose insert waits on the first's uncommitted record
		// waits on a lock, its query naming the table.
		Waiting: func(ctx context.Context) (n int, err error) {
			err = b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, table).Scan(&n)
			return n, err
		},
		LockRecord: func(ctx context.Context, tx TTx, id uuid.UUID) error {
			return v.exec(ctx, tx, `SELECT id FROM `+table+` WHERE id = $1 FOR SHARE`, id.String())
		},
		OtherTable: func(t *testing.T) inbox.Driver[TTx] { return v.newDriver(t, b, "billing_inbox", true) },
		Chain: func(t *testing.T) inboxtest.Chain[TTx] {
			_, od, err := v.driver(b, &postgres.Config{Schema: b.schema, InboxTable: "received"})
			if err != nil {
				t.Fatal(err)
			}
			pg, err := postgres.New(b.pool, &postgres.Config{Schema: b.schema})
			if err != nil {
				t.Fatal(err)
			}
			if err := pg.Store().Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[TTx]{Outbox: outbox.New(od, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, b.db, `SELECT convert_from(payload, 'UTF8') FROM "`+b.schema+`".messages`, inboxtest.ScanString)
			}}
		},
	}
}

// The pgx and the database/sql backends share a table: a message handled
// through one is a duplicate through the other.
func TestInboxVariantsShareTheTable(t *testing.T) {
	b := newInboxBundle(t)
	ctx := context.Background()
	cfg := &postgres.Config{Schema: b.schema}
	pg, err := postgres.New(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := postgres.NewSQL(b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pd, sd := pg.Inbox(), sq.Inbox()
	if err := pd.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sd.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: outbox.NewID(), Topic: "orders"}
	pin, err := inbox.New(pd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := pin.Handle(ctx, m, func(context.Context, pgx.Tx, inbox.Message) error { return nil }); err != nil || o != inbox.Handled {
		t.Fatalf("Handle through pgx = %v, %v; want handled", o, err)
	}
	sin, err := inbox.New(sd, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := sin.Handle(ctx, m, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil || o != inbox.Duplicate {
		t.Fatalf("Handle through database/sql = %v, %v; want duplicate", o, err)
	}
	if n, err := sin.Purge(ctx, time.Now().Add(time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("Purge through database/sql = %d, %v; want 1", n, err)
	}
}

// Schema names are checked like table names (the suite checks those).
func TestInboxBadSchemaNames(t *testing.T) {
	for _, schema := range []string{`a"b`, "x; DROP SCHEMA y", "1abc", strings.Repeat("a", 41)} {
		cfg := &postgres.Config{Schema: schema}
		_, errPgx := postgres.New(nil, cfg)
		_, errSQL := postgres.NewSQL(nil, cfg)
		_, errAll := postgres.SchemaSQL(cfg)
		_, errMig := postgres.Migrations(cfg)
		for _, err := range []error{errPgx, errSQL, errAll, errMig} {
			if !errors.Is(err, stores.ErrBadIdentifier) {
				t.Errorf("schema %q: %v, want ErrBadIdentifier", schema, err)
			}
		}
	}
}

// A topic PostgreSQL's text refuses (invalid UTF-8, NUL) is stored
// cleaned up rather than failing the message.
func TestInboxOddTopicIsCleanedUp(t *testing.T) {
	b := newInboxBundle(t)
	sq, err := postgres.NewSQL(b.db, &postgres.Config{Schema: b.schema})
	if err != nil {
		t.Fatal(err)
	}
	d := sq.Inbox()
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: outbox.NewID(), Topic: "a\xffb\x00c"}
	in, err := inbox.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(context.Background(), m, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got := inboxtest.Query(t, b.db, `SELECT topic FROM "`+b.schema+`".inbox`, inboxtest.ScanString)
	if len(got) != 1 || got[0] != "a\uFFFDb\uFFFDc" {
		t.Fatalf("topics %q, want [a\uFFFDb\uFFFDc]", got)
	}
}
