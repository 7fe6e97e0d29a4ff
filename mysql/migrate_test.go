package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/stores"
)

// versions returns SchemaVersions as "table version/latest recorded-at"
// lines.
func versions(t *testing.T, d *mysql.DB) []string {
	t.Helper()
	vs, err := d.SchemaVersions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		at := "unrecorded"
		if !v.AppliedAt.IsZero() {
			at = v.AppliedAt.Format(time.RFC3339Nano)
		}
		out = append(out, fmt.Sprintf("%s %d/%d %s", v.Table, v.Version, v.Latest, at))
	}
	return out
}

func newDB(t *testing.T, db *sql.DB, cfg *mysql.Config) *mysql.DB {
	t.Helper()
	d, err := mysql.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// migrated returns a database of the test's own with both tables migrated.
func migrated(t *testing.T) (*sql.DB, *mysql.DB) {
	t.Helper()
	db := mysqltest.Open(t)
	d := newDB(t, db, nil)
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, d
}

func wantVersions(t *testing.T, d *mysql.DB, want ...string) {
	t.Helper()
	if got := versions(t, d); !reflect.DeepEqual(got, want) {
		t.Fatalf("schema versions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Migrate records the version of each table it manages; run again, it
// changes nothing. Store.Migrate and Inbox.Migrate manage one table each.
func TestMigrateRecordsVersions(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 678901000, time.UTC)
	d := newDB(t, db, &mysql.Config{Clock: clocktest.New(t0)})
	wantVersions(t, d, "outbox_messages 0/3 unrecorded", "outbox_inbox 0/1 unrecorded")
	if err := d.Store().Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wantVersions(t, d, "outbox_messages 3/3 2026-01-02T03:04:05.678901Z", "outbox_inbox 0/1 unrecorded")
	if err := d.Inbox().Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wantVersions(t, d, "outbox_messages 3/3 2026-01-02T03:04:05.678901Z", "outbox_inbox 1/1 2026-01-02T03:04:05.678901Z")

	later := newDB(t, db, &mysql.Config{Clock: clocktest.New(t0.Add(time.Hour))})
	for range 2 {
		if err := later.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wantVersions(t, later, "outbox_messages 3/3 2026-01-02T03:04:05.678901Z", "outbox_inbox 1/1 2026-01-02T03:04:05.678901Z")
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+mysql.VersionTable+"`").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d version rows (err %v), want 2", n, err)
	}
}

// Processes starting together all migrate both tables: each succeeds, and
// the tables are migrated once.
func TestConcurrentMigrates(t *testing.T) {
	t.Parallel()
	open := mysqltest.NewDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		d := newDB(t, open(), nil) // a pool of its own, as another process has
		wg.Go(func() { errs <- d.Migrate(ctx) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	vs, err := newDB(t, open(), nil).SchemaVersions(ctx)
	if err != nil || len(vs) != 2 || vs[0].Version != 3 || vs[1].Version != 1 || vs[0].AppliedAt.IsZero() || vs[1].AppliedAt.IsZero() {
		t.Fatalf("versions %+v (err %v), want the outbox table at 3 and the inbox table at 1, recorded", vs, err)
	}
}

// MigrateDown to 0 drops both tables and their version rows; Migrate then
// makes them again, empty and working.
func TestMigrateDownRoundTrip(t *testing.T) {
	t.Parallel()
	db, d := migrated(t)
	ctx := context.Background()
	ob := outbox.New(d, nil)
	enqueueOne := func() uuid.UUID {
		t.Helper()
		id := outbox.NewID()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Enqueue(ctx, tx, outbox.Message{ID: id, Topic: "orders"}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return id
	}
	enqueueOne()
	in, err := inbox.New(d.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(ctx, inbox.Message{ID: outbox.NewID(), Topic: "orders"}, nopInbox); err != nil {
		t.Fatal(err)
	}

	if err := d.MigrateDown(ctx, -1); err == nil {
		t.Fatal("MigrateDown(-1) succeeded")
	}
	if err := d.MigrateDown(ctx, 1); err != nil { // drops the enqueue procedure
		t.Fatal(err)
	}
	if vs := versions(t, d); !strings.HasPrefix(vs[0], "outbox_messages 1/3 ") || !strings.HasPrefix(vs[1], "outbox_inbox 1/1 ") {
		t.Fatalf("versions after MigrateDown(1): %v", vs)
	}
	var routines int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.routines
		WHERE routine_schema = DATABASE() AND routine_name LIKE 'outbox\_messages\_%'`).Scan(&routines); err != nil || routines != 0 {
		t.Fatalf("%d routines after MigrateDown(1) (err %v), want none", routines, err)
	}
	if st := storeStats(t, d.Store()); st["orders"].Pending != 1 {
		t.Fatalf("after MigrateDown(1): %+v, want the event kept", st)
	}
	if err := d.MigrateDown(ctx, 0); err != nil {
		t.Fatal(err)
	}
	wantVersions(t, d, "outbox_messages 0/3 unrecorded", "outbox_inbox 0/1 unrecorded")
	var tables string
	err = db.QueryRowContext(ctx, `SELECT COALESCE(GROUP_CONCAT(table_name ORDER BY table_name), '')
		FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&tables)
	if err != nil || tables != mysql.VersionTable {
		t.Fatalf("tables after MigrateDown(0): %q (err %v), want only %s", tables, err, mysql.VersionTable)
	}
	if err := d.Store().CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Fatalf("CheckSchema after MigrateDown(0) = %v, want ErrSchemaMissing", err)
	}
	if err := d.MigrateDown(ctx, 0); err != nil { // again: nothing to do
		t.Fatal(err)
	}

	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	vs := versions(t, d)
	if !strings.HasPrefix(vs[0], "outbox_messages 3/3 ") || !strings.HasPrefix(vs[1], "outbox_inbox 1/1 ") || strings.Contains(vs[0]+vs[1], "unrecorded") {
		t.Fatalf("versions after Migrate: %v", vs)
	}
	if st := storeStats(t, d.Store()); len(st) != 0 {
		t.Fatalf("stats after the round trip: %+v, want an empty table", st)
	}
	id := enqueueOne()
	b, err := d.Store().Claim(ctx, stores.ClaimParams{Limit: 10, Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if recs := b.Records(); len(recs) != 1 || recs[0].ID != id {
		t.Fatalf("claimed %+v, want the one new event", recs)
	}
	if err := b.Complete(ctx, stores.Outcome{Now: time.Now(), Published: []uuid.UUID{id}}); err != nil {
		t.Fatal(err)
	}
}

func nopInbox(context.Context, *sql.Tx, inbox.Message) error { return nil }

func storeStats(t *testing.T, s stores.Store) map[string]stores.TopicStats {
	t.Helper()
	st, err := s.Stats(context.Background(), stores.StatsParams{Now: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]stores.TopicStats{}
	for _, ts := range st {
		out[ts.Topic] = ts
	}
	return out
}

// runScript runs a SQL file of ours statement by statement, as a team's
// migration tool would.
func runScript(t *testing.T, db *sql.DB, script string) {
	t.Helper()
	// As the mysql client reads it: statements end with the delimiter at
	// the end of a line, ";" until a DELIMITER line changes it.
	delim, stmt := ";", ""
	for _, line := range strings.SplitAfter(script, "\n") {
		l := strings.TrimSpace(line)
		if d, ok := strings.CutPrefix(l, "DELIMITER "); ok {
			delim = strings.TrimSpace(d)
			continue
		}
		if strings.HasPrefix(l, "--") {
			continue
		}
		stmt += line
		if !strings.HasSuffix(l, delim) {
			continue
		}
		q := strings.TrimSuffix(strings.TrimSpace(stmt), delim)
		stmt = ""
		if strings.TrimSpace(q) == "" {
			continue
		}
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v in:\n%s", err, q)
		}
	}
}

// dump returns every row of table, each column as text, in the order of
// its primary key.
func dump(t *testing.T, db *sql.DB, table, order string) []string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM `" + table + "` ORDER BY " + order)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				parts[i] = cols[i] + "=NULL"
			} else {
				parts[i] = fmt.Sprintf("%s=%q", cols[i], v)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Version 1 of each table is the schema as it was before migrations were
// numbered, byte for byte (testdata holds that DDL, frozen).
func TestVersion1IsTheUnversionedSchema(t *testing.T) {
	t.Parallel()
	ms, err := mysql.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{mysql.DefaultTable: "testdata/outbox_v1.sql", mysql.DefaultInboxTable: "testdata/inbox_v1.sql"}
	for _, m := range ms {
		if m.Version != 1 {
			continue
		}
		old, err := os.ReadFile(want[m.Table])
		if err != nil {
			t.Fatal(err)
		}
		if m.Up != string(old) {
			t.Errorf("version 1 of %s differs from %s", m.Table, want[m.Table])
		}
		delete(want, m.Table)
	}
	if len(want) != 0 {
		t.Errorf("no version 1 for %v", want)
	}
}

// Tables made before versions were recorded (by the Migrate of before, or
// by hand from migrations/) are at version 1: Migrate records that and
// brings them to the latest version without losing or changing an event
// or a record, and the store and the inbox go on with them.
func TestUpgradeFromUnversionedTables(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	ctx := context.Background()
	for _, f := range []string{"testdata/outbox_v1.sql", "testdata/inbox_v1.sql"} {
		ddl, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		runScript(t, db, string(ddl))
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := clocktest.New(t0.Add(24 * time.Hour))
	d := newDB(t, db, &mysql.Config{Clock: clock})
	b := bundle{db: db, d: d, store: d.Store(), ob: outbox.New(d, nil)}
	wantVersions(t, d, "outbox_messages 1/3 unrecorded", "outbox_inbox 1/1 unrecorded")

	// Published (kept for retention) and dead events, then pending ones:
	// one due, one not before tomorrow, one waiting for a retry.
	old := messages("orders", 3, t0)
	if err := b.enqueue(ctx, old, true); err != nil {
		t.Fatal(err)
	}
	c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records()) != 3 {
		t.Fatalf("claimed %d, want 3", len(c.Records()))
	}
	err = c.Complete(ctx, stores.Outcome{Now: t0.Add(time.Minute), Published: []uuid.UUID{old[0].ID},
		Dead:  []stores.Failure{{ID: old[1].ID, Err: "refused"}},
		Retry: []stores.Failure{{ID: old[2].ID, Err: "timeout", NextAttempt: t0.Add(2 * time.Hour)}}})
	if err != nil {
		t.Fatal(err)
	}
	pending := messages("payments", 2, t0.Add(time.Second))
	pending[1].Key, pending[1].NotBefore = "later", t0.Add(24*time.Hour)
	pending[0].Headers = map[string]string{"traceparent": "00-abc-def-01"}
	if err := b.enqueue(ctx, pending, true); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(d.Inbox(), &inbox.Config{Clock: clocktest.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	handled := inbox.Message{ID: outbox.NewID(), Topic: "orders"}
	if _, err := in.Handle(ctx, handled, nopInbox); err != nil {
		t.Fatal(err)
	}

	beforeOutbox := dump(t, db, "outbox_messages", "seq")
	beforeKeys := dump(t, db, "outbox_messages_keys", "key_hash")
	beforeInbox := dump(t, db, "outbox_inbox", "id")
	if len(beforeOutbox) != 5 || len(beforeInbox) != 1 {
		t.Fatalf("%d events and %d records before Migrate, want 5 and 1", len(beforeOutbox), len(beforeInbox))
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := clock.Now().Format(time.RFC3339Nano)
	wantVersions(t, d, "outbox_messages 3/3 "+at, "outbox_inbox 1/1 "+at)
	for _, c := range []struct {
		table         string
		before, after []string
	}{
		{"outbox_messages", beforeOutbox, dump(t, db, "outbox_messages", "seq")},
		{"outbox_messages_keys", beforeKeys, dump(t, db, "outbox_messages_keys", "key_hash")},
		{"outbox_inbox", beforeInbox, dump(t, db, "outbox_inbox", "id")},
	} {
		if !reflect.DeepEqual(c.before, c.after) {
			t.Errorf("%s changed in Migrate:\nbefore %q\nafter  %q", c.table, c.before, c.after)
		}
	}

	// The store claims the pending events, each when it is due.
	claim := func(now time.Time) []uuid.UUID {
		t.Helper()
		c, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		ids := recIDs(c.Records())
		if err := c.Complete(ctx, stores.Outcome{Now: now, Published: ids}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := claim(t0.Add(time.Hour)); !reflect.DeepEqual(got, []uuid.UUID{pending[0].ID}) {
		t.Fatalf("claimed %v an hour in, want the due pending event %v", got, pending[0].ID)
	}
	if got := claim(t0.Add(25 * time.Hour)); len(got) != 2 {
		t.Fatalf("claimed %v a day in, want the retry and the scheduled event", got)
	}
	dead, err := b.store.Dead(ctx, stores.DeadParams{})
	if err != nil || len(dead) != 1 || dead[0].ID != old[1].ID || dead[0].LastError != "refused" {
		t.Fatalf("dead %+v (err %v), want %v", dead, err, old[1].ID)
	}
	if o, err := in.Handle(ctx, handled, nopInbox); err != nil || o != inbox.Duplicate {
		t.Fatalf("redelivery after Migrate = %v, %v; want duplicate", o, err)
	}
}

// SchemaSQL, run by hand, makes what Migrate makes, versions included, so
// that Migrate finds nothing to do.
func TestSchemaSQLIsWhatMigrateMakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := &mysql.Config{Table: "events", InboxTable: "billing_inbox"}
	ddl, err := mysql.SchemaSQL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byHand, migrated := mysqltest.Open(t), mysqltest.Open(t)
	runScript(t, byHand, ddl)
	if err := newDB(t, migrated, cfg).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"events", "events_keys", "billing_inbox", mysql.VersionTable} {
		var a, b, name string
		if err := byHand.QueryRowContext(ctx, "SHOW CREATE TABLE `"+table+"`").Scan(&name, &a); err != nil {
			t.Fatal(err)
		}
		if err := migrated.QueryRowContext(ctx, "SHOW CREATE TABLE `"+table+"`").Scan(&name, &b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s by SchemaSQL:\n%s\nby Migrate:\n%s", table, a, b)
		}
	}
	d := newDB(t, byHand, cfg)
	before := versions(t, d)
	if strings.Contains(strings.Join(before, " "), "unrecorded") || !strings.HasPrefix(before[0], "events 3/3 ") {
		t.Fatalf("versions after SchemaSQL: %v", before)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	wantVersions(t, d, before...)
}

// Config refuses what it cannot mean: a negative duration, two tables of
// one name.
func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  mysql.Config
		want string
	}{
		{mysql.Config{ClaimTimeout: -time.Second}, "ClaimTimeout"},
		{mysql.Config{InboxTable: mysql.DefaultTable}, "Config.Table and Config.InboxTable"},
		{mysql.Config{InboxTable: "outbox_messages_keys"}, "key-lock table and Config.InboxTable"},
		{mysql.Config{Table: mysql.VersionTable}, "version table"},
	} {
		if _, err := mysql.New(nil, &c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error about %s", c.cfg, err, c.want)
		}
		if _, err := mysql.SchemaSQL(&c.cfg); err == nil {
			t.Errorf("SchemaSQL(%+v) succeeded", c.cfg)
		}
	}
	if _, err := mysql.New(nil, nil); err == nil {
		t.Error("New with a nil *sql.DB succeeded")
	}
}

// Migrate takes its turn on the database's migration lock: while another
// session holds it, Migrate waits, and gives up when its context ends,
// saying so.
func TestMigrateWaitsForTheLock(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	ctx := context.Background()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	// The lock's name, as Migrate computes it.
	const lock = `CONCAT('outbox_migrate_', SHA1(DATABASE()))`
	var got int
	if err := holder.QueryRowContext(ctx, `SELECT GET_LOCK(`+lock+`, 0)`).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK = %d (err %v)", got, err)
	}
	d := newDB(t, db, nil)
	wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = d.Migrate(wctx)
	if err == nil || !strings.Contains(err.Error(), "another migration") || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("Migrate while the lock is held = %v after %v; want it to wait, then say another migration holds the lock", err, time.Since(start))
	}
	if vs := versions(t, d); vs[0] != "outbox_messages 0/3 unrecorded" {
		t.Fatalf("Migrate without the lock changed the schema: %v", vs)
	}
	done := make(chan error, 1)
	go func() { done <- d.Migrate(ctx) }()
	if _, err := holder.ExecContext(ctx, `DO RELEASE_LOCK(`+lock+`)`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Migrate still waiting 30s after the lock was released")
	}
}

// A table dropped by hand after it was migrated is made again by the next
// Migrate, as Migrate always did, although its version row is left.
func TestMigrateRemakesADroppedTable(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	ctx := context.Background()
	d := newDB(t, db, nil)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE `outbox_inbox`"); err != nil {
		t.Fatal(err)
	}
	if vs := versions(t, d); vs[1] != "outbox_inbox 0/1 unrecorded" {
		t.Fatalf("versions after the drop: %v, want the inbox at 0", vs)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if vs := versions(t, d); !strings.HasPrefix(vs[1], "outbox_inbox 1/1 2") {
		t.Fatalf("versions after Migrate: %v, want the inbox at 1, recorded", vs)
	}
	in, err := inbox.New(d.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(ctx, inbox.Message{ID: outbox.NewID(), Topic: "t"}, nopInbox); err != nil {
		t.Fatal(err)
	}
}

// A migration statement that changes the outbox table (003 adds an index)
// while another transaction holds the table gives up after its tries (the
// conformance case MigrateLetsWritersThrough checks that writers go
// through meanwhile, and that the step is applied once the table is free):
// the error names the step, the tries and the open transactions, the
// table stays at its version, and the session setting goes back with the
// migration's connection.
func TestMigrateGivesUpOnABusyTable(t *testing.T) {
	t.Parallel()
	db, d := migrated(t)
	ctx := context.Background()
	stepBack(t, db)
	// A reader's transaction, left open: it holds the table's metadata
	// lock, which the ALTER TABLE of step 003 must wait for.
	reader, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback() //nolint:errcheck
	var n, readerID int
	if err := reader.QueryRowContext(ctx, "SELECT COUNT(*), CONNECTION_ID() FROM outbox_messages").Scan(&n, &readerID); err != nil {
		t.Fatal(err)
	}
	mysql.SetMigrateTableLock(d, time.Second, 50*time.Millisecond, 2)
	err = d.Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "Lock wait timeout") || !strings.Contains(err.Error(), "2 tries of 1s") ||
		!strings.Contains(err.Error(), "outbox_messages version 3") || !strings.Contains(err.Error(), fmt.Sprintf("id %d (user ", readerID)) {
		t.Fatalf("Migrate with the table held = %v, want a lock wait timeout after 2 tries, naming outbox_messages version 3 and the reader (id %d)",
			err, readerID)
	}
	if vs := versions(t, d); !strings.HasPrefix(vs[0], "outbox_messages 2/3 ") {
		t.Fatalf("after the failed Migrate: %v, want the outbox table at version 2", vs)
	}
	var timeout, global int64
	if err := db.QueryRowContext(ctx, `SELECT @@SESSION.lock_wait_timeout, @@GLOBAL.lock_wait_timeout`).Scan(&timeout, &global); err != nil {
		t.Fatal(err)
	}
	if timeout != global {
		t.Errorf("a pooled connection's lock_wait_timeout is %d after Migrate, want the server's %d", timeout, global)
	}
}

// stepBack takes the outbox table (default names) back to version 2, its
// last step (003, an ALTER TABLE) taken down by hand: MigrateDown takes
// both tables to one version.
func stepBack(t *testing.T, db *sql.DB) {
	t.Helper()
	ms, err := mysql.Migrations(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Table == "outbox_messages" && m.Version == 3 {
			runScript(t, db, m.Down)
		}
	}
	if _, err := db.Exec("UPDATE `" + mysql.VersionTable + "` SET version = 2 WHERE `table_name` = 'outbox_messages'"); err != nil {
		t.Fatal(err)
	}
}

// metadataLockWaits reports whether a session of db's database waits for a
// table's metadata lock: the migration's ALTER TABLE.
func metadataLockWaits(ctx context.Context, db *sql.DB) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.processlist
		WHERE db = DATABASE() AND state LIKE 'Waiting for table metadata lock%'`).Scan(&n)
	return n > 0, err
}
