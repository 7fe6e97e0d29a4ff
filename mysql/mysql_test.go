package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/storetest"
)

type bundle struct {
	db    *sql.DB
	cfg   *mysql.Config
	d     *mysql.DB
	store *mysql.Store
	ob    *outbox.Outbox[*sql.Tx]
}

func setup(t *testing.T) bundle { return setupB(t) }

func setupB(t testing.TB) bundle {
	t.Helper()
	db := mysqltest.Open(t)
	cfg := &mysql.Config{}
	d, err := mysql.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Store().Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return bundle{db: db, cfg: cfg, d: d, store: d.Store(), ob: outbox.New(d, nil)}
}

// enqueue writes msgs in one transaction and commits it, or rolls it back.
func (b bundle) enqueue(ctx context.Context, msgs []outbox.Message, commit bool) error {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := b.ob.Enqueue(ctx, tx, msgs...); err != nil {
		_ = tx.Rollback()
		return err
	}
	if !commit {
		return tx.Rollback()
	}
	return tx.Commit()
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		return storetest.Harness{Store: b.store, Enqueue: b.enqueue, Begin: b.begin, Open: func(t *testing.T) stores.Store {
			other, err := mysql.New(b.db, b.cfg)
			if err != nil {
				t.Fatal(err)
			}
			return other.Store()
		},
			StepBack:       func(context.Context) error { stepBack(t, b.db); return nil },
			MigrationWaits: func(ctx context.Context) (bool, error) { return metadataLockWaits(ctx, b.db) },
		}
	})
}

// begin opens a writer transaction as an application would, at the
// session's default isolation (REPEATABLE READ).
func (b bundle) begin(ctx context.Context) (storetest.Tx, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	return sqlTx{tx: tx, ob: b.ob}, err
}

type sqlTx struct {
	tx *sql.Tx
	ob *outbox.Outbox[*sql.Tx]
}

func (t sqlTx) Enqueue(ctx context.Context, msgs ...outbox.Message) error {
	return t.ob.Enqueue(ctx, t.tx, msgs...)
}
func (t sqlTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.tx.Rollback() }

// The application's DSN is not the relay's: enqueue through one far from
// the defaults (another loc and time_zone, no parseTime, parameters
// interpolated by the driver), relay through another, and the suite must
// not notice.
func TestConformanceMixedDSNs(t *testing.T) {
	t.Parallel()
	tokyo := time.FixedZone("UTC+9", 9*60*60)
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		open := mysqltest.NewDatabase(t)
		app := open(func(c *mysqldrv.Config) {
			c.Loc = tokyo
			c.ParseTime = false
			c.InterpolateParams = true
			c.Params["time_zone"] = "'+09:00'"
		})
		relay := open(func(c *mysqldrv.Config) {
			c.Loc = time.FixedZone("UTC-5", -5*60*60)
			c.InterpolateParams = true
		})
		rd, err := mysql.New(relay, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := rd.Store()
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		d, err := mysql.New(app, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := bundle{db: app, d: d, store: s, ob: outbox.New(d, nil)}
		return storetest.Harness{Store: s, Enqueue: b.enqueue, Begin: b.begin}
	})
}

func TestEnqueueNeedsOpenTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := outbox.Message{Topic: "orders"}

	if err := b.ob.Enqueue(ctx, nil, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("nil tx: %v, want ErrNoTransaction", err)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Commit()
	if err := b.ob.Enqueue(ctx, tx, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("committed tx: %v, want ErrNoTransaction", err)
	}
	tx, err = b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	if err := b.ob.Enqueue(ctx, tx, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("rolled-back tx: %v, want ErrNoTransaction", err)
	}
	st, err := b.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
	if err != nil || len(st) != 0 {
		t.Fatalf("enqueue outside a transaction wrote rows: %+v (err %v)", st, err)
	}
}

func TestSchemaMissing(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t) // never migrated
	d, err := mysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, outbox.ErrSchemaMissing) {
			t.Errorf("%s: %v, want ErrSchemaMissing", what, err)
		}
	}
	check("CheckSchema", s.CheckSchema(ctx))
	_, err = s.Claim(ctx, stores.ClaimParams{Limit: 1, Now: time.Now()})
	check("Claim", err)
	_, err = s.Stats(ctx, stores.StatsParams{Now: time.Now()})
	check("Stats", err)
	_, err = s.Blocked(ctx, stores.BlockedParams{})
	check("Blocked", err)
	_, err = s.Dead(ctx, stores.DeadParams{})
	check("Dead", err)
	_, err = s.Dead(ctx, stores.DeadParams{IDs: []uuid.UUID{outbox.NewID()}})
	check("Dead by ids", err)
	_, err = s.Replay(ctx, stores.ReplayParams{Now: time.Now()})
	check("Replay", err)
	_, err = s.Purge(ctx, stores.PurgeParams{Before: time.Now()})
	check("Purge", err)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	check("Enqueue", outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"}))

	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Errorf("CheckSchema after Migrate: %v", err)
	}
}

func TestBadIdentifiers(t *testing.T) {
	t.Parallel()
	for _, c := range []mysql.Config{
		{Table: "x; DROP TABLE y"},
		{Table: "a`b"},
		{Table: `a"b`},
		{Table: "1abc"},
		{Table: "a-b"},
		{Table: "db.table"},
		{Table: strings.Repeat("t", 65)},
	} {
		if _, err := mysql.New(nil, &c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%q) = %v, want ErrBadIdentifier", c.Table, err)
		}
		if _, err := mysql.Migrations(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("Migrations(%q) = %v, want ErrBadIdentifier", c.Table, err)
		}
		if _, err := mysql.SchemaSQL(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%q) = %v, want ErrBadIdentifier", c.Table, err)
		}
	}
	if _, err := mysql.New(mysqltest.Open(t), &mysql.Config{Table: strings.Repeat("t", 64)}); err != nil {
		t.Errorf("a 64-byte table name: %v", err)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	cfg := &mysql.Config{Table: "events"}
	d, err := mysql.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	ctx := context.Background()
	// Relays starting together all migrate.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Migrate(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var cols string
	err = db.QueryRowContext(ctx, `SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index)
		FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'events' AND index_name = 'pending'`).Scan(&cols)
	if err != nil || cols != "status,available_at,seq" {
		t.Fatalf("pending index columns %q (err %v), want status,available_at,seq", cols, err)
	}
}

// The plain SQL files for goose, golang-migrate and atlas users are the
// templates rendered with the defaults; this keeps them from drifting, and
// keeps every file there a migration.
func TestPlainSQLFilesMatch(t *testing.T) {
	t.Parallel()
	ms, err := mysql.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range ms {
		base := fmt.Sprintf("migrations/%03d_%s", m.Version, m.Name)
		want[base+".up.sql"], want[base+".down.sql"] = m.Up, m.Down
	}
	for path, sql := range want {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != sql {
			t.Errorf("%s is stale; regenerate it from mysql.Migrations(nil)", path)
		}
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := want[f]; !ok {
			t.Errorf("%s is no migration of mysql.Migrations(nil)", f)
		}
	}
	if len(files) != len(want) {
		t.Errorf("migrations/ holds %d files, want %d", len(files), len(want))
	}
}
