package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/storetest"
)

type bundle struct {
	path  string
	db    *sql.DB
	d     *sqlite.DB
	store *sqlite.Store
	ob    *outbox.Outbox[*sql.Tx]
}

// setup opens a fresh, migrated database file of the test's own.
func setup(t *testing.T) bundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := open(t, path)
	d, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return bundle{path: path, db: db, d: d, store: d.Store(), ob: outbox.New(d, nil)}
}

func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// enqueue writes msgs in one transaction and commits it or rolls it back.
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
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		return storetest.Harness{Store: b.store, Enqueue: b.enqueue, Begin: b.begin, Open: func(t *testing.T) stores.Store {
			other, err := sqlite.New(b.db, nil)
			if err != nil {
				t.Fatal(err)
			}
			return other.Store()
		}}
	})
}

// begin opens a writer transaction as an application would, through
// BeginTx on a handle from Open (_txlock=immediate).
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

func TestEnqueueNeedsOpenTransaction(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	m := outbox.Message{Topic: "orders"}
	if err := b.ob.Enqueue(ctx, nil, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("nil tx: %v, want ErrNoTransaction", err)
	}
	for _, end := range []func(*sql.Tx) error{(*sql.Tx).Commit, (*sql.Tx).Rollback} {
		tx, err := b.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = end(tx)
		if err := b.ob.Enqueue(ctx, tx, m); !errors.Is(err, outbox.ErrNoTransaction) {
			t.Errorf("ended tx: %v, want ErrNoTransaction", err)
		}
	}
	st, err := b.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
	if err != nil || len(st) != 0 {
		t.Fatalf("enqueue outside a transaction wrote rows: %+v (err %v)", st, err)
	}
}

func TestSchemaMissing(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "empty.db")) // never migrated
	d, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	ctx := context.Background()
	if err := s.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("CheckSchema: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Claim(ctx, stores.ClaimParams{Limit: 1, Now: time.Now()}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Claim: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Stats(ctx, stores.StatsParams{Now: time.Now()}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Stats: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Blocked(ctx, stores.BlockedParams{}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Blocked: %v, want ErrSchemaMissing", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Enqueue: %v, want ErrSchemaMissing", err)
	}
	_ = tx.Rollback()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSchema(ctx); err != nil {
		t.Errorf("CheckSchema after Migrate: %v", err)
	}
}

func TestBadIdentifiers(t *testing.T) {
	for _, c := range []sqlite.Config{
		{Table: "x; DROP TABLE y"},
		{Table: `a"b`},
		{Table: "1abc"},
		{Table: "a-b"},
		{Table: "main.messages"},
		{Table: "this_name_is_far_too_long_for_an_outbox_table_name"},
	} {
		if _, err := sqlite.New(nil, &c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%+v) = %v, want ErrBadIdentifier", c, err)
		}
		if _, err := sqlite.SchemaSQL(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%+v) = %v, want ErrBadIdentifier", c, err)
		}
		if _, err := sqlite.Migrations(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("Migrations(%+v) = %v, want ErrBadIdentifier", c, err)
		}
		inboxCfg := sqlite.Config{InboxTable: c.Table}
		if _, err := sqlite.New(nil, &inboxCfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%+v) = %v, want ErrBadIdentifier", inboxCfg, err)
		}
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	b := setup(t) // migrated once
	ctx := context.Background()
	if err := b.store.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if err := b.d.Migrate(ctx); err != nil {
		t.Fatalf("DB.Migrate: %v", err)
	}
	var ddl string
	err := b.db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE type = 'index' AND name = 'outbox_messages_pending'`).Scan(&ddl)
	if err != nil || !strings.Contains(ddl, "WHERE status = 0") {
		t.Fatalf("pending index is not partial on pending rows: %q (err %v)", ddl, err)
	}
}

func TestOtherTableName(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	cfg := &sqlite.Config{Table: "events"}
	d, err := sqlite.New(b.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Stats(ctx, stores.StatsParams{Now: time.Now()}); len(st) != 1 || st[0].Pending != 1 {
		t.Fatalf("events table stats: %+v", st)
	}
	if st, _ := b.store.Stats(ctx, stores.StatsParams{Now: time.Now()}); len(st) != 0 {
		t.Fatalf("default table got the event: %+v", st)
	}
}

func TestOpenSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?#%")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x.db")
	db := open(t, path)
	ctx := context.Background()
	for pragma, want := range map[string]string{
		"journal_mode": "wal",
		"busy_timeout": "30000",
		"foreign_keys": "1",
		"synchronous":  "2",
	} {
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q (err %v), want %q", pragma, got, err, want)
		}
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not created at %s: %v", path, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")); err == nil {
		t.Errorf("Open in a missing directory succeeded")
	}
}
