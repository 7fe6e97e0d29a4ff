package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// The plain SQL files for goose, golang-migrate and atlas users are the
// templates rendered with the default names; this keeps them from
// drifting, and SchemaSQL equal to the up files in order.
func TestPlainSQLFilesMatch(t *testing.T) {
	var ups []string
	plain := map[string]bool{}
	files, _ := filepath.Glob("migrations/*.sql")
	for _, f := range files {
		plain[filepath.Base(f)] = true
	}
	for _, c := range []struct{ dir, table string }{
		{"schema/outbox", sqlite.DefaultTable},
		{"schema/inbox", sqlite.DefaultInboxTable},
	} {
		tmpls, err := filepath.Glob(filepath.Join(c.dir, "*.sql"))
		if err != nil || len(tmpls) == 0 {
			t.Fatalf("no templates in %s (%v)", c.dir, err)
		}
		slices.Sort(tmpls)
		for _, f := range tmpls {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			tm := template.Must(template.New(f).Option("missingkey=error").Parse(string(raw)))
			if err := tm.Execute(&want, map[string]string{"Table": c.table}); err != nil {
				t.Fatal(err)
			}
			name := filepath.Base(f)
			got, err := os.ReadFile(filepath.Join("migrations", name))
			if err != nil {
				t.Fatalf("%s has no plain file: %v", f, err)
			}
			if string(got) != want.String() {
				t.Errorf("migrations/%s is stale; regenerate it from %s with Table = %s", name, f, c.table)
			}
			delete(plain, name)
			if strings.HasSuffix(name, ".up.sql") {
				ups = append(ups, want.String())
			}
		}
	}
	for name := range plain {
		t.Errorf("migrations/%s has no template", name)
	}
	ms, err := sqlite.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	var fromMigrations []string
	for _, m := range ms {
		fromMigrations = append(fromMigrations, m.Up)
	}
	if !slices.Equal(fromMigrations, ups) {
		t.Errorf("Migrations are not the up files in order: %+v", ms)
	}
	all, err := sqlite.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(all, strings.Join(ups, "\n")) {
		t.Errorf("SchemaSQL does not start with the up migrations in order:\n%s", all)
	}
}

// SchemaSQL, applied by hand to an empty database, makes what Migrate
// makes, versions included: Migrate then has nothing to do.
func TestSchemaSQLIsWhatMigrateMakes(t *testing.T) {
	ctx := context.Background()
	cfg := &sqlite.Config{Table: "events", InboxTable: "billing_inbox"}
	ddl, err := sqlite.SchemaSQL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	byHand, migrated := open(t, filepath.Join(dir, "hand.db")), open(t, filepath.Join(dir, "migrated.db"))
	for range 2 { // idempotent
		if _, err := byHand.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("SchemaSQL:\n%s\n%v", ddl, err)
		}
	}
	if err := newDB(t, migrated, cfg).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	objects := `SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name`
	if h, m := dump(t, byHand, objects), dump(t, migrated, objects); h != m {
		t.Fatalf("SchemaSQL made\n%s\nMigrate made\n%s", h, m)
	}
	d := newDB(t, byHand, cfg)
	vs := mustVersions(t, d)
	for _, v := range vs {
		if v.Version != v.Latest || v.AppliedAt.IsZero() || time.Since(v.AppliedAt) > time.Hour {
			t.Errorf("after SchemaSQL: %+v, want the latest version, applied now", v)
		}
	}
	before := schemaDump(t, byHand)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if after := schemaDump(t, byHand); after != before {
		t.Fatalf("Migrate after SchemaSQL changed the database:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// checkVersions checks that SchemaVersions reports both tables at their
// latest versions, recorded at applied.
func checkVersions(t *testing.T, d *sqlite.DB, applied time.Time) {
	t.Helper()
	vs, err := d.SchemaVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := d.Config()
	if len(vs) != 2 || vs[0].Table != cfg.Table || vs[1].Table != cfg.InboxTable {
		t.Fatalf("SchemaVersions = %+v, want the outbox table, then the inbox table", vs)
	}
	for _, v := range vs {
		if v.Latest < 1 || v.Version != v.Latest || !v.AppliedAt.Equal(applied) {
			t.Errorf("%s: %+v, want version %d applied at %v", v.Table, v, v.Latest, applied)
		}
	}
}

// schemaDump is every object of the database's schema, and the version
// table's rows.
func schemaDump(t *testing.T, db *sql.DB) string {
	t.Helper()
	return dump(t, db, `SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name`) +
		dump(t, db, `SELECT * FROM `+sqlite.VersionTable+` ORDER BY table_name`)
}

// dump renders every row of query.
func dump(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%#v\n", vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func newDB(t *testing.T, db *sql.DB, cfg *sqlite.Config) *sqlite.DB {
	t.Helper()
	d, err := sqlite.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Migrate on tables at the latest version changes nothing: not the
// schema, not the recorded versions and their times.
func TestMigrateTwiceIsANoOp(t *testing.T) {
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "x.db"))
	clock := clocktest.New(t0)
	var logs bytes.Buffer
	d := newDB(t, db, &sqlite.Config{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkVersions(t, d, t0)
	for _, table := range []string{"outbox_messages", "outbox_inbox"} {
		if !strings.Contains(logs.String(), "msg=\"sqlite: migrated\" table="+table+" from=0 to=") {
			t.Errorf("no log of migrating %s:\n%s", table, logs.String())
		}
	}
	before := schemaDump(t, db)
	clock.Advance(time.Hour)
	logs.Reset()
	for range 2 {
		if err := d.Migrate(ctx); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if err := d.Store().Migrate(ctx); err != nil {
			t.Fatalf("Store.Migrate again: %v", err)
		}
		if err := d.Inbox().Migrate(ctx); err != nil {
			t.Fatalf("Inbox.Migrate again: %v", err)
		}
	}
	if after := schemaDump(t, db); after != before {
		t.Fatalf("Migrate on an up-to-date database changed it:\nbefore\n%s\nafter\n%s", before, after)
	}
	checkVersions(t, d, t0)
	if logs.Len() != 0 {
		t.Errorf("Migrate with nothing to do logged:\n%s", logs.String())
	}
}

// Migrates started at once, on handles from Open (one queue) and on
// handles opened otherwise (SQLite's lock alone), all succeed; the tables
// are migrated once.
func TestConcurrentMigrates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	dsn, err := sqlite.DSN(path)
	if err != nil {
		t.Fatal(err)
	}
	var dbs []*sql.DB
	for i := range 6 {
		db := open(t, path)
		if i%2 == 1 {
			if db, err = sql.Open(sqlite.DriverName, dsn); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
		}
		dbs = append(dbs, db)
	}
	start := make(chan struct{})
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, db := range dbs {
		d := newDB(t, db, &sqlite.Config{Clock: clocktest.New(t0.Add(time.Duration(i) * time.Second))})
		wg.Go(func() {
			<-start
			errs[i] = d.Migrate(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	vs, err := newDB(t, dbs[0], nil).SchemaVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Version != v.Latest || v.AppliedAt.IsZero() {
			t.Errorf("after concurrent Migrates: %+v", v)
		}
	}
	if vs[0].AppliedAt != vs[1].AppliedAt {
		t.Errorf("the tables were migrated by different Migrates: %+v (each Migrate does both in one transaction)", vs)
	}
}

// MigrateDown to 0 drops both tables and their versions; Migrate brings
// them back, and they work.
func TestMigrateDownRoundTrip(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(2), true); err != nil {
		t.Fatal(err)
	}
	if err := b.d.MigrateDown(ctx, -1); err == nil {
		t.Error("MigrateDown(-1) succeeded")
	}
	vs, err := b.d.SchemaVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.d.MigrateDown(ctx, vs[0].Latest); err != nil {
		t.Fatalf("MigrateDown to the latest version: %v", err)
	}
	if st := stats(t, b.store); st.Pending != 2 {
		t.Fatalf("MigrateDown to the current version changed the outbox: %+v", st)
	}
	if err := b.d.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.store.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("CheckSchema after MigrateDown(0): %v, want ErrSchemaMissing", err)
	}
	in, err := inbox.New(b.d.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, *sql.Tx, inbox.Message) error { return nil }
	if _, err := in.Handle(ctx, inbox.Message{ID: outbox.NewID(), Topic: "x"}, nop); !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("inbox after MigrateDown(0): %v, want ErrSchemaMissing", err)
	}
	vs, err = b.d.SchemaVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Version != 0 || !v.AppliedAt.IsZero() {
			t.Errorf("after MigrateDown(0): %+v, want version 0", v)
		}
	}
	if err := b.d.MigrateDown(ctx, 0); err != nil {
		t.Fatalf("MigrateDown(0) again: %v", err)
	}

	if err := b.d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range mustVersions(t, b.d) {
		if v.Version != v.Latest {
			t.Errorf("after Migrate: %+v", v)
		}
	}
	msgs := testMsgs(3)
	if err := b.enqueue(ctx, msgs, true); err != nil {
		t.Fatal(err)
	}
	if got := mustClaim(t, b.store, 10, t0.Add(time.Hour)); len(got.Records()) != 3 {
		t.Fatalf("after the round trip, claimed %d, want 3", len(got.Records()))
	}
	m := inbox.Message{ID: outbox.NewID(), Topic: "x"}
	for _, want := range []inbox.Outcome{inbox.Handled, inbox.Duplicate} {
		if o, err := in.Handle(ctx, m, nop); err != nil || o != want {
			t.Fatalf("inbox after the round trip: %v, %v, want %v", o, err, want)
		}
	}
}

func mustVersions(t *testing.T, d *sqlite.DB) []sqlite.SchemaVersion {
	t.Helper()
	vs, err := d.SchemaVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// A table dropped by hand is version 0, whatever its recorded row says:
// Migrate creates it again.
func TestMigrateRecreatesADroppedTable(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if _, err := b.db.ExecContext(ctx, `DROP TABLE outbox_messages`); err != nil {
		t.Fatal(err)
	}
	if vs := mustVersions(t, b.d); vs[0].Version != 0 || vs[1].Version != vs[1].Latest {
		t.Fatalf("after dropping the outbox table: %+v", vs)
	}
	if err := b.d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.store.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after Migrate: %v", err)
	}
}

// Tables created by the schema of the first release, before versions were
// recorded, are version 1: Migrate records them (and would apply what came
// after), and loses or changes no event and no inbox record — pending,
// dead or published and kept — and the store then claims the pending
// events.
func TestUpgradeFromUnversionedTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db := open(t, path)
	for _, f := range []string{"testdata/outbox_messages_v1.sql", "testdata/outbox_inbox_v1.sql"} {
		ddl, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, string(ddl)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	clock := clocktest.New(t0.Add(24 * time.Hour))
	d := newDB(t, db, &sqlite.Config{Clock: clock})
	ob := outbox.New(d, nil)
	enqueue := func(msgs ...outbox.Message) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Enqueue(ctx, tx, msgs...); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Hour)
	// Published and kept, then dead.
	kept, dead := testMsgs(2), testMsgs(1)
	enqueue(append(kept, dead...)...)
	b := mustClaim(t, d.Store(), 10, now)
	err := b.Complete(ctx, stores.Outcome{Now: now, Published: []uuid.UUID{kept[0].ID, kept[1].ID},
		Dead: []stores.Failure{{ID: dead[0].ID, Err: "refused"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Pending: unkeyed, keyed, not before a time, with headers.
	pending := []outbox.Message{
		{ID: outbox.NewID(), Topic: "orders", CreatedAt: t0, Payload: []byte(`{"n":1}`)},
		{ID: outbox.NewID(), Topic: "orders", Key: "k", Type: "t", CreatedAt: t0, Headers: map[string]string{"a": "b"}},
		{ID: outbox.NewID(), Topic: "stock", CreatedAt: t0, NotBefore: t0.Add(30 * time.Minute)},
	}
	enqueue(pending...)
	in, err := inbox.New(d.Inbox(), &inbox.Config{Clock: clocktest.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	handled := inbox.Message{ID: outbox.NewID(), Topic: "payments"}
	if _, err := in.Handle(ctx, handled, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}

	for _, v := range mustVersions(t, d) {
		if v.Version != 1 || !v.AppliedAt.IsZero() {
			t.Fatalf("before Migrate: %+v, want version 1, never recorded", v)
		}
	}
	const events, records = `SELECT * FROM outbox_messages ORDER BY seq`, `SELECT * FROM outbox_inbox ORDER BY id`
	beforeEvents, beforeRecords := dump(t, db, events), dump(t, db, records)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkVersions(t, d, clock.Now())
	if got := dump(t, db, events); got != beforeEvents {
		t.Fatalf("Migrate changed the events:\nbefore\n%s\nafter\n%s", beforeEvents, got)
	}
	if got := dump(t, db, records); got != beforeRecords {
		t.Fatalf("Migrate changed the inbox records:\nbefore\n%s\nafter\n%s", beforeRecords, got)
	}
	all, err := d.Store().Stats(ctx, stores.StatsParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var st stores.TopicStats
	for _, ts := range all {
		st.Pending += ts.Pending
		st.Dead += ts.Dead
		st.Published += ts.Published
	}
	if st.Pending != 3 || st.Dead != 1 || st.Published != 2 {
		t.Fatalf("after Migrate: %+v, want 3 pending, 1 dead, 2 published", all)
	}
	got := mustClaim(t, d.Store(), 10, now)
	var ids []uuid.UUID
	for _, r := range got.Records() {
		ids = append(ids, r.ID)
	}
	if len(ids) != 3 || !slices.Contains(ids, pending[0].ID) || !slices.Contains(ids, pending[1].ID) || !slices.Contains(ids, pending[2].ID) {
		t.Fatalf("after Migrate, claimed %v, want the 3 pending events", ids)
	}
	if o, err := in.Handle(ctx, handled, func(context.Context, *sql.Tx, inbox.Message) error { return nil }); err != nil || o != inbox.Duplicate {
		t.Fatalf("a message handled before Migrate, redelivered after: %v, %v, want duplicate", o, err)
	}
}
