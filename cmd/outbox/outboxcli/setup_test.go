package outboxcli_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// env is an outbox table of the test's own, migrated through the CLI, with
// the store and a way to enqueue behind the CLI's back.
type env struct {
	t     *testing.T
	db    []string // the CLI's database flags
	store stores.Store
	// enqueueTx commits msgs in one transaction.
	enqueueTx func(ctx context.Context, msgs []outbox.Message) error
}

// newPG is an env in a schema of the test's own in the shared PostgreSQL.
func newPG(t *testing.T) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	e := &env{t: t, db: []string{"--database-url", pgtest.URL(), "--schema", schema}}
	e.migrate()
	cfg := &postgres.Config{Schema: schema}
	d, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(d, nil)
	e.store = d.Store()
	e.enqueueTx = func(ctx context.Context, msgs []outbox.Message) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Enqueue(ctx, tx, msgs...) })
	}
	return e
}

// newSQLite is an env in a SQLite file of the test's own.
func newSQLite(t *testing.T) *env {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.db")
	e := &env{t: t, db: []string{"--database-url", "sqlite://" + path}}
	e.migrate()
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	d, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(d, nil)
	e.store = d.Store()
	e.enqueueTx = func(ctx context.Context, msgs []outbox.Message) error { return sqlTx(ctx, db, ob, msgs) }
	return e
}

// newMySQL is an env in a database of the test's own on the shared
// MariaDB.
func newMySQL(t *testing.T) *env {
	t.Helper()
	db := mysqltest.Open(t)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: []string{"--database-url", "mysql://root@127.0.0.1:3306/" + name}}
	e.migrate()
	d, err := mysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(d, nil)
	e.store = d.Store()
	e.enqueueTx = func(ctx context.Context, msgs []outbox.Message) error { return sqlTx(ctx, db, ob, msgs) }
	return e
}

func sqlTx(ctx context.Context, db *sql.DB, ob *outbox.Outbox[*sql.Tx], msgs []outbox.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := ob.Enqueue(ctx, tx, msgs...); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// eachStore runs f on PostgreSQL, SQLite and MariaDB, each a subtest.
func eachStore(t *testing.T, f func(t *testing.T, e *env)) {
	for _, s := range []struct {
		name string
		open func(*testing.T) *env
	}{{"postgres", newPG}, {"sqlite", newSQLite}, {"mysql", newMySQL}} {
		t.Run(s.name, func(t *testing.T) { f(t, s.open(t)) })
	}
}

func (e *env) migrate() {
	e.t.Helper()
	if code, out, stderr := run(e.t, context.Background(), append([]string{"migrate"}, e.db...)...); code != 0 {
		e.t.Fatalf("migrate: %s%s", out, stderr)
	}
}

// enqueue commits msgs in one transaction and returns them with their IDs.
func (e *env) enqueue(msgs ...outbox.Message) []outbox.Message {
	e.t.Helper()
	for i := range msgs {
		if msgs[i].ID == (outbox.Message{}).ID {
			msgs[i].ID = outbox.NewID()
		}
	}
	if err := e.enqueueTx(context.Background(), msgs); err != nil {
		e.t.Fatal(err)
	}
	return msgs
}

// fail claims what is due and fails it: retried (due again in an hour)
// when dead is false, dead otherwise, with error text errText. It returns
// how many it claimed.
func (e *env) fail(dead bool, errText string) int {
	e.t.Helper()
	ctx := context.Background()
	now := time.Now()
	b, err := e.store.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: now})
	if err != nil {
		e.t.Fatal(err)
	}
	o := stores.Outcome{Now: now}
	for _, r := range b.Records() {
		f := stores.Failure{ID: r.ID, Err: errText, NextAttempt: now.Add(time.Hour)}
		if dead {
			o.Dead = append(o.Dead, f)
		} else {
			o.Retry = append(o.Retry, f)
		}
	}
	if err := b.Complete(ctx, o); err != nil {
		e.t.Fatal(err)
	}
	return len(b.Records())
}

// cli runs the CLI with the environment's database flags after args.
func (e *env) cli(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	return run(e.t, context.Background(), append(args, e.db...)...)
}

// lines are s's non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// mainWith is outboxcli.Main with writers of the caller's.
func mainWith(ctx context.Context, args []string, stdout, stderr *logtest.Buffer) int {
	return outboxcli.Main(ctx, args, stdout, stderr)
}
