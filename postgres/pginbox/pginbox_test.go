package pginbox_test

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
	"github.com/outboxgo/outbox/postgres/pginbox"
	"github.com/outboxgo/outbox/stores"
)

func TestConformancePgx(t *testing.T) {
	inboxtest.Run(t, harness(variant[pgx.Tx]{
		driver: func(b *bundle, cfg *pginbox.Config) (driver[pgx.Tx], error) { return pginbox.NewPgx(b.pool, cfg) },
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		outbox: func(cfg *postgres.Config) (outbox.Driver[pgx.Tx], error) { return postgres.NewPgxDriver(cfg) },
	}))
}

func TestConformanceSQL(t *testing.T) {
	inboxtest.Run(t, harness(variant[*sql.Tx]{
		driver: func(b *bundle, cfg *pginbox.Config) (driver[*sql.Tx], error) { return pginbox.NewSQL(b.db, cfg) },
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
		outbox: func(cfg *postgres.Config) (outbox.Driver[*sql.Tx], error) { return postgres.NewSQLDriver(cfg) },
	}))
}

// driver is what NewPgx and NewSQL return.
type driver[TTx any] interface {
	inbox.Driver[TTx]
	Migrate(ctx context.Context) error
}

// variant is what differs between the pgx and the database/sql drivers.
type variant[TTx any] struct {
	driver func(b *bundle, cfg *pginbox.Config) (driver[TTx], error)
	exec   func(ctx context.Context, tx TTx, q string, args ...any) error
	outbox func(cfg *postgres.Config) (outbox.Driver[TTx], error)
}

// bundle is a test's own schema: a pgx pool and a database/sql handle on
// the same database.
type bundle struct {
	pool   *pgxpool.Pool
	db     *sql.DB
	schema string
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	return &bundle{pool: pool, db: db, schema: pgtest.Schema(t, pool)}
}

func (v variant[TTx]) newDriver(t *testing.T, b *bundle, table string, migrate bool) driver[TTx] {
	t.Helper()
	d, err := v.driver(b, &pginbox.Config{Schema: b.schema, Table: table})
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

func harness[TTx any](v variant[TTx]) inboxtest.Harness[TTx] {
	return inboxtest.Harness[TTx]{
		Setup: v.env,
		Unmigrated: func(t *testing.T) inbox.Driver[TTx] {
			return v.newDriver(t, newBundle(t), "", false) // not even the schema exists
		},
		New: func(table string) []error {
			_, err := v.driver(&bundle{}, &pginbox.Config{Table: table})
			return []error{err}
		},
		SchemaSQL: func(table string) (string, error) {
			return pginbox.SchemaSQL(&pginbox.Config{Table: table})
		},
	}
}

// env migrates the inbox (table "received") in a schema of the test's own
// and creates an effects table, whose seq records the order effects were
// applied in.
func (v variant[TTx]) env(t *testing.T) inboxtest.Env[TTx] {
	b := newBundle(t)
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
			cfg := &postgres.Config{Schema: b.schema}
			store, err := postgres.New(b.pool, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			od, err := v.outbox(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return inboxtest.Chain[TTx]{Outbox: outbox.New(od, nil), Payloads: func(t *testing.T) []string {
				return inboxtest.Query(t, b.db, `SELECT convert_from(payload, 'UTF8') FROM "`+b.schema+`".messages`, inboxtest.ScanString)
			}}
		},
	}
}

// The pgx and the database/sql drivers share a table: a message handled
// through one is a duplicate through the other.
func TestVariantsShareTheTable(t *testing.T) {
	b := newBundle(t)
	ctx := context.Background()
	cfg := &pginbox.Config{Schema: b.schema}
	pd, err := pginbox.NewPgx(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := pginbox.NewSQL(b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sd.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: outbox.NewID(), Topic: "orders"}
	if o, err := inbox.New(pd, nil).Handle(ctx, m, func(context.Context, pgx.Tx, inbox.Message) error { return nil }); err != nil || o != inbox.Handled {
		t.Fatalf("Handle through pgx = %v, %v; want handled", o, err)
	}
	sin := inbox.New(sd, nil)
	if o, err := sin.Handle(ctx, m, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil || o != inbox.Duplicate {
		t.Fatalf("Handle through database/sql = %v, %v; want duplicate", o, err)
	}
	if n, err := sin.Purge(ctx, time.Now().Add(time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("Purge through database/sql = %d, %v; want 1", n, err)
	}
}

// Schema names are checked like table names (the suite checks those).
func TestBadSchemaNames(t *testing.T) {
	for _, schema := range []string{`a"b`, "x; DROP SCHEMA y", "1abc", strings.Repeat("a", 41)} {
		cfg := &pginbox.Config{Schema: schema}
		_, errPgx := pginbox.NewPgx(nil, cfg)
		_, errSQL := pginbox.NewSQL(nil, cfg)
		_, errDDL := pginbox.SchemaSQL(cfg)
		for _, err := range []error{errPgx, errSQL, errDDL} {
			if !errors.Is(err, stores.ErrBadIdentifier) {
				t.Errorf("schema %q: %v, want ErrBadIdentifier", schema, err)
			}
		}
	}
}

// A topic PostgreSQL's text refuses (invalid UTF-8, NUL) is stored
// cleaned up rather than failing the message.
func TestOddTopicIsCleanedUp(t *testing.T) {
	b := newBundle(t)
	d, err := pginbox.NewSQL(b.db, &pginbox.Config{Schema: b.schema})
	if err == nil {
		err = d.Migrate(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	m := inbox.Message{ID: outbox.NewID(), Topic: "a\xffb\x00c"}
	if _, err := inbox.New(d, nil).Handle(context.Background(), m, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	got := inboxtest.Query(t, b.db, `SELECT topic FROM "`+b.schema+`".inbox`, inboxtest.ScanString)
	if len(got) != 1 || got[0] != "a\uFFFDb\uFFFDc" {
		t.Fatalf("topics %q, want [a\uFFFDb\uFFFDc]", got)
	}
}
