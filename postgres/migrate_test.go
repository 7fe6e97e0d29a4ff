package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// latest is the version Migrate brings each table to.
func latest(t *testing.T) (outboxV, inboxV int) {
	t.Helper()
	ms, err := postgres.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		switch m.Table {
		case "outbox.messages":
			outboxV = max(outboxV, m.Version)
		case "outbox.inbox":
			inboxV = max(inboxV, m.Version)
		}
	}
	return outboxV, inboxV
}

func versions(t *testing.T, db interface {
	SchemaVersions(context.Context) ([]postgres.SchemaVersion, error)
}) []postgres.SchemaVersion {
	t.Helper()
	vs, err := db.SchemaVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 {
		t.Fatalf("SchemaVersions = %+v, want the outbox and the inbox table", vs)
	}
	return vs
}

func wantVersions(t *testing.T, vs []postgres.SchemaVersion, schema string, outboxV, inboxV int) {
	t.Helper()
	lo, li := latest(t)
	want := []postgres.SchemaVersion{
		{Table: schema + ".messages", Version: outboxV, Latest: lo},
		{Table: schema + ".inbox", Version: inboxV, Latest: li},
	}
	for i := range want {
		got := vs[i]
		got.AppliedAt = time.Time{}
		if got != want[i] {
			t.Errorf("SchemaVersions[%d] = %+v, want %+v", i, vs[i], want[i])
		}
	}
}

// The latest versions: the outbox table's 5 (1, the schema as it was
// before versioning; 2, the enqueue function; 3, the dead list's index; 4,
// the delayed rows' index; 5, keys compared as bytes), the inbox table's 1.
// TestMigrateUpgradeFromUnversioned takes a version-1 table with events to
// the latest.
func TestLatestVersion(t *testing.T) {
	if o, i := latest(t); o != 5 || i != 1 {
		t.Fatalf("latest versions: outbox %d, inbox %d; want 5 and 1 (or a new upgrade test)", o, i)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	b := setup(t) // migrated once through pgx
	ctx := context.Background()
	before := versions(t, b.pg)
	lo, li := latest(t)
	wantVersions(t, before, b.cfg.Schema, lo, li)
	if err := b.pg.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if err := b.sqldb.Migrate(ctx); err != nil {
		t.Fatalf("Migrate through database/sql: %v", err)
	}
	if err := b.store.Migrate(ctx); err != nil {
		t.Fatalf("Store.Migrate: %v", err)
	}
	if err := b.pg.Inbox().Migrate(ctx); err != nil {
		t.Fatalf("Inbox.Migrate: %v", err)
	}
	if after := versions(t, b.sqldb); !slices.Equal(after, before) {
		t.Fatalf("Migrate again changed the versions: %+v, then %+v", before, after)
	}
	var partial bool
	err := b.pool.QueryRow(ctx, `SELECT indexdef LIKE '%WHERE ((status = 0) AND (key = ''''::text))%' FROM pg_indexes
		WHERE schemaname = $1 AND indexname = 'messages_pending'`, b.cfg.Schema).Scan(&partial)
	if err != nil || !partial {
		t.Fatalf("pending index is not partial on pending rows (err %v)", err)
	}
}

// Store.Migrate makes the outbox table, Inbox.Migrate the inbox table,
// each alone.
func TestMigrateOneTable(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx := context.Background()
	lo, li := latest(t)
	for _, c := range []struct {
		name           string
		migrate        func(*postgres.DB) error
		outboxV, inbox int
	}{
		{"store", func(db *postgres.DB) error { return db.Store().Migrate(ctx) }, lo, 0},
		{"inbox", func(db *postgres.DB) error { return db.Inbox().Migrate(ctx) }, 0, li},
	} {
		schema := pgtest.Schema(t, pool)
		db, err := postgres.New(pool, &postgres.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		wantVersions(t, versions(t, db), schema, 0, 0)
		if err := c.migrate(db); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wantVersions(t, versions(t, db), schema, c.outboxV, c.inbox)
	}
}

// Processes that migrate at once take turns: every one succeeds.
func TestMigrateConcurrently(t *testing.T) {
	pool := pgtest.Pool(t)
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	cfg := &postgres.Config{Schema: pgtest.Schema(t, pool)}
	pg, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sq, err := postgres.NewSQL(sqlDB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	migrates := []func(context.Context) error{pg.Migrate, sq.Migrate, pg.Store().Migrate, sq.Inbox().Migrate, pg.Migrate, sq.Migrate}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := make(chan struct{})
	errs := make([]error, len(migrates))
	var wg sync.WaitGroup
	for i, m := range migrates {
		wg.Go(func() {
			<-start
			errs[i] = m(ctx)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d of %d: %v", i+1, len(migrates), err)
		}
	}
	lo, li := latest(t)
	wantVersions(t, versions(t, pg), cfg.Schema, lo, li)
}

// MigrateDown to 0 drops both tables; Migrate makes them again, and they
// work.
func TestMigrateDownRoundTrip(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for _, db := range []interface {
		Migrate(context.Context) error
		MigrateDown(context.Context, int) error
		SchemaVersions(context.Context) ([]postgres.SchemaVersion, error)
	}{b.pg, b.sqldb} {
		if err := db.MigrateDown(ctx, 1); err != nil {
			t.Fatalf("MigrateDown(1): %v", err)
		}
		wantVersions(t, versions(t, db), b.cfg.Schema, 1, 1)
		if fn := enqueueFn(t, b.pool, b.cfg.Schema); fn {
			t.Error("MigrateDown(1) left the enqueue function")
		}
		if c := keyCollation(t, b.pool, b.cfg.Schema); c != "default" {
			t.Errorf("after MigrateDown(1) keys compare under collation %q, want the database's (default)", c)
		}
		if err := db.MigrateDown(ctx, 0); err != nil {
			t.Fatalf("MigrateDown(0): %v", err)
		}
		wantVersions(t, versions(t, db), b.cfg.Schema, 0, 0)
		if err := b.store.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
			t.Fatalf("CheckSchema after MigrateDown(0) = %v, want ErrSchemaMissing", err)
		}
		if err := db.MigrateDown(ctx, 0); err != nil {
			t.Fatalf("MigrateDown(0) again: %v", err)
		}
		if err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate after MigrateDown: %v", err)
		}
		lo, li := latest(t)
		wantVersions(t, versions(t, db), b.cfg.Schema, lo, li)
		if fn := enqueueFn(t, b.pool, b.cfg.Schema); !fn {
			t.Error("Migrate after MigrateDown made no enqueue function")
		}
		if c := keyCollation(t, b.pool, b.cfg.Schema); c != "C" {
			t.Errorf("after Migrate keys compare under collation %q, want C", c)
		}
	}
	for _, to := range []int{-1, 3} {
		if err := b.pg.MigrateDown(ctx, to); err == nil {
			t.Errorf("MigrateDown(%d) succeeded", to)
		}
	}
	id := enqueue(t, b, outbox.Message{Topic: "orders", Key: "k"})
	if got := claimIDs(t, b.store); !slices.Equal(got, []uuid.UUID{id}) {
		t.Fatalf("claimed %v after the round trip, want [%v]", got, id)
	}
}

// A version row above the latest (a newer release migrated) is left alone
// by Migrate, refused by MigrateDown.
func TestMigrateNewerVersion(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `UPDATE "`+b.cfg.Schema+`".`+postgres.VersionTable+` SET version = 99 WHERE table_name = 'messages'`); err != nil {
		t.Fatal(err)
	}
	if err := b.pg.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with a newer version: %v", err)
	}
	if vs := versions(t, b.pg); vs[0].Version != 99 {
		t.Fatalf("Migrate changed a newer version: %+v", vs[0])
	}
	if err := b.pg.MigrateDown(ctx, 0); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("MigrateDown from a newer version = %v, want a refusal", err)
	}
	if err := b.store.CheckSchema(ctx); err != nil {
		t.Fatalf("the refused MigrateDown dropped the table: %v", err)
	}
}

// An UPGRADE: tables created by the schema as it was before versioning
// (testdata, copied from the branch), with pending, dead and kept events
// and an inbox record in them, are version 1; Migrate records the latest
// version, loses or changes no row, and the store claims the pending
// events.
func TestMigrateUpgradeFromUnversioned(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	for _, f := range []struct{ file, table string }{{"outbox_v1.sql.tmpl", "messages"}, {"inbox_v1.sql.tmpl", "inbox"}} {
		if _, err := pool.Exec(ctx, render(t, filepath.Join("testdata", f.file), schema, f.table)); err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
	}
	table := `"` + schema + `".messages`
	now := time.Now().UTC().Truncate(time.Millisecond)
	ids := map[string]uuid.UUID{}
	for _, e := range []struct {
		name, key   string
		status      int
		attempts    int
		lastError   any
		publishedAt any
	}{
		{"unkeyed", "", 0, 0, nil, nil},
		{"k head", "k", 0, 0, nil, nil},
		{"k second", "k", 0, 0, nil, nil},
		{"retrying", "k2", 0, 2, "broker said no", nil},
		{"dead", "k3", 2, 3, "gone", nil},
		{"kept", "", 1, 0, nil, now},
	} {
		id := outbox.NewID()
		ids[e.name] = id
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (id, topic, key, type, payload, headers, created_at, available_at,
			status, attempts, last_error, published_at) VALUES ($1, 'orders', $2, 'T', $3, '{"h": "v"}', $4, $4, $5, $6, $7, $8)`,
			id, e.key, []byte(e.name), now.Add(-time.Minute), e.status, e.attempts, e.lastError, e.publishedAt); err != nil {
			t.Fatal(err)
		}
	}
	inboxID := outbox.NewID()
	if _, err := pool.Exec(ctx, `INSERT INTO "`+schema+`".inbox (id, topic, received_at) VALUES ($1, 'orders', $2)`, inboxID, now); err != nil {
		t.Fatal(err)
	}
	rows := func() string {
		t.Helper()
		var out string
		err := pool.QueryRow(ctx, `SELECT (SELECT json_agg(to_jsonb(m) ORDER BY seq) FROM `+table+` m)::text || ' ' ||
			(SELECT json_agg(to_jsonb(i) ORDER BY id) FROM "`+schema+`".inbox i)::text`).Scan(&out)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := rows()

	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	vs := versions(t, db)
	wantVersions(t, vs, schema, 1, 1)
	if !vs[0].AppliedAt.IsZero() {
		t.Errorf("an unversioned table has an AppliedAt: %+v", vs[0])
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	lo, li := latest(t)
	vs = versions(t, db)
	wantVersions(t, vs, schema, lo, li)
	for _, v := range vs {
		if v.AppliedAt.IsZero() {
			t.Errorf("no AppliedAt recorded: %+v", v)
		}
	}
	if after := rows(); after != before {
		t.Fatalf("Migrate changed the rows:\nbefore %s\nafter  %s", before, after)
	}
	if c := keyCollation(t, pool, schema); c != "C" {
		t.Errorf("after the upgrade keys compare under collation %q, want C", c)
	}

	b := bundle{pool: pool, pg: db, store: db.Store()}
	want := []uuid.UUID{ids["unkeyed"], ids["k head"], ids["retrying"]}
	got := claimIDs(t, b.store)
	slices.SortFunc(want, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if !slices.Equal(got, want) {
		t.Fatalf("claimed %v after the upgrade, want the heads %v", got, want)
	}
	dead, err := b.store.Dead(ctx, stores.DeadParams{})
	if err != nil || len(dead) != 1 || dead[0].ID != ids["dead"] || dead[0].LastError != "gone" {
		t.Fatalf("Dead after the upgrade = %+v, %v", dead, err)
	}
	st, err := b.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
	if err != nil || len(st) != 1 || st[0].Pending != 4 || st[0].Dead != 1 || st[0].Published != 1 {
		t.Fatalf("Stats after the upgrade = %+v, %v", st, err)
	}
}

// render executes a schema template as the branch's Migrate did.
func render(t *testing.T, path, schema, table string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := template.Must(template.New(path).Parse(string(raw))).Execute(&buf, map[string]string{"Schema": schema, "Table": table}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// enqueue commits msgs through the pgx backend and returns the first's ID.
func enqueue(t *testing.T, b bundle, msgs ...outbox.Message) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	for i := range msgs {
		if msgs[i].ID == uuid.Nil {
			msgs[i].ID = outbox.NewID()
		}
	}
	if err := outbox.New(b.pg, nil).Enqueue(ctx, tx, msgs...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return msgs[0].ID
}

// claimIDs claims what is due, lets it go, and returns the IDs in order.
func claimIDs(t *testing.T, s *postgres.Store) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	batch, err := s.Claim(ctx, stores.ClaimParams{Limit: 100, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Abort(ctx) //nolint:errcheck
	var ids []uuid.UUID
	for _, r := range batch.Records() {
		ids = append(ids, r.ID)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return ids
}

// The plain SQL files for goose, golang-migrate and atlas users are the
// templates rendered with the defaults; this keeps them from drifting.
func TestPlainSQLFilesMatch(t *testing.T) {
	ms, err := postgres.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, m := range ms {
		base := fmt.Sprintf("%03d_%s", m.Version, m.Name)
		want[base+".up.sql"], want[base+".down.sql"] = m.Up, m.Down
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("%s is no migration: remove it", f)
		}
	}
	for name, sql := range want {
		got, err := os.ReadFile(filepath.Join("migrations", name))
		if err != nil {
			t.Errorf("%v: render it from postgres.Migrations(nil)", err)
			continue
		}
		if string(got) != sql {
			t.Errorf("migrations/%s is stale; render it from postgres.Migrations(nil)", name)
		}
	}
}

// SchemaSQL, applied by hand (twice), makes what Migrate makes: the same
// indexes, the latest versions recorded, nothing left for Migrate to do.
func TestSchemaSQLIsWhatMigrateMakes(t *testing.T) {
	ctx := context.Background()
	b := setup(t) // made by Migrate
	byHand := pgtest.Schema(t, b.pool)
	cfg := &postgres.Config{Schema: byHand}
	ddl, err := postgres.SchemaSQL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.pool.Exec(ctx, ddl); err != nil {
			t.Fatalf("SchemaSQL by hand: %v", err)
		}
	}
	db, err := postgres.New(b.pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	vs := versions(t, db)
	lo, li := latest(t)
	wantVersions(t, vs, byHand, lo, li)
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if again := versions(t, db); !slices.Equal(again, vs) {
		t.Fatalf("Migrate after SchemaSQL changed the versions: %+v, then %+v", vs, again)
	}
	if got, want := indexes(t, b.pool, byHand), indexes(t, b.pool, b.cfg.Schema); !slices.Equal(got, want) {
		t.Fatalf("SchemaSQL made the indexes\n%q\nMigrate made\n%q", got, want)
	}
}

// indexes lists the definitions of the indexes in schema, without its name.
func indexes(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT replace(indexdef, $1, 'S') FROM pg_indexes WHERE schemaname = $2 ORDER BY indexname`,
		`"`+schema+`"`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.ReplaceAll(s, schema, "S"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no index in %s", schema)
	}
	return out
}

// enqueueFn reports whether schema has the enqueue function.
func enqueueFn(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT to_regprocedure($1) IS NOT NULL`,
		`"`+schema+`".enqueue(text, text, text, bytea, jsonb, timestamptz, uuid, timestamptz)`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// keyCollation is the collation the outbox table's key column compares
// under: "default" for the database's own.
func keyCollation(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	var c string
	if err := pool.QueryRow(context.Background(), `SELECT c.collname FROM pg_attribute a
		JOIN pg_collation c ON c.oid = a.attcollation
		WHERE a.attrelid = to_regclass($1) AND a.attname = 'key'`, `"`+schema+`".messages`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// A migration step that changes the table (005 alters the key column)
// while another transaction holds the table gives up after its tries (the
// conformance case MigrateLetsWritersThrough checks that writers go
// through meanwhile, and that the step is applied once the table is free):
// the error names the step, the tries and the session holding the table,
// and the table stays at its version.
func TestMigrateGivesUpOnABusyTable(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	if err := stepBack(ctx, b); err != nil {
		t.Fatal(err)
	}
	table := b.cfg.Schema + ".messages"
	// A reader's transaction, left open: it holds the table's ACCESS SHARE
	// lock, which the ALTER TABLE of step 005 must wait for.
	reader, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx) //nolint:errcheck
	var readerPID int
	if err = reader.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT count(*) FROM "`+b.cfg.Schema+`".messages) AS c`).Scan(&readerPID); err != nil {
		t.Fatal(err)
	}
	postgres.SetMigrateTableLock(b.pg, 100*time.Millisecond, 50*time.Millisecond, 3)
	err = b.pg.Migrate(ctx)
	if !postgres.IsLockNotAvailable(err) || !strings.Contains(err.Error(), "3 tries of 100ms") || !strings.Contains(err.Error(), table) ||
		!strings.Contains(err.Error(), fmt.Sprintf("held now by pid %d (client backend, user ", readerPID)) {
		t.Fatalf("Migrate with the table held = %v, want lock_not_available after 3 tries, naming %s and the reader (pid %d)", err, table, readerPID)
	}
	wantVersions(t, versions(t, b.pg), b.cfg.Schema, 4, 1)
}

// stepBack takes the outbox table back to version 4, the last step (005,
// an ALTER TABLE) taken down by hand: MigrateDown takes both tables to one
// version.
func stepBack(ctx context.Context, b bundle) error {
	ms, err := postgres.Migrations(b.cfg)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ms, func(m postgres.Migration) bool { return m.Table == b.cfg.Schema+".messages" && m.Version == 5 })
	if i < 0 {
		return errors.New("no step 5 of the outbox table")
	}
	if _, err := b.pool.Exec(ctx, ms[i].Down); err != nil {
		return err
	}
	_, err = b.pool.Exec(ctx, `UPDATE "`+b.cfg.Schema+`".`+postgres.VersionTable+` SET version = 4 WHERE table_name = 'messages'`)
	return err
}

// migrationWaits reports whether a session waits for the outbox table's
// ACCESS EXCLUSIVE lock, not granted yet: the migration's ALTER TABLE.
func migrationWaits(ctx context.Context, b bundle) (bool, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'relation' AND relation = to_regclass($1) AND NOT granted AND mode = 'AccessExclusiveLock'`,
		`"`+b.cfg.Schema+`".messages`).Scan(&n)
	return n > 0, err
}
