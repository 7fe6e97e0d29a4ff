package outboxcli_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/sqlite"
)

// run runs the CLI in-process and returns its exit code and output.
func run(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = outboxcli.Main(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// failsWith asserts one line on stderr containing each of want, and exit 1.
func failsWith(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, _, stderr := run(t, context.Background(), args...)
	if code != 1 {
		t.Errorf("%v: exit %d, want 1", args, code)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "outbox: ") {
		t.Errorf("%v: stderr is not one line starting with \"outbox: \": %q", args, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%v: stderr %q does not mention %q", args, stderr, w)
		}
	}
	if strings.Contains(stderr, "s3cret") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("%v: stderr leaks a password or a stack trace: %q", args, stderr)
	}
}

func TestBadInput(t *testing.T) {
	t.Setenv("OUTBOX_DATABASE_URL", "")
	failsWith(t, []string{"status"}, "--database-url", "OUTBOX_DATABASE_URL")
	failsWith(t, []string{"status", "--database-url", "mysqlx://bob:s3cret@db/app"}, `unsupported scheme "mysqlx"`, "bob:xxxxx@db")
	failsWith(t, []string{"status", "--database-url", "not a url"}, "not a URL")
	failsWith(t, []string{"status", "--database-url", "postgres://bob:s3cret@127.0.0.1:1/app"}, "cannot reach PostgreSQL", "bob:xxxxx@127.0.0.1:1")
	failsWith(t, []string{"migrate", "--print", "--table", "x;drop"}, "not a valid SQL identifier")
	failsWith(t, []string{"dead", "retry"}, "--all")
	failsWith(t, []string{"dead", "retry", "nope"}, "not an event ID")
	failsWith(t, []string{"dead-letter", "nope"}, "not an event ID")
	failsWith(t, []string{"relay", "--keyed-failure", "skip", "--database-url", pgtest.URL()}, "--keyed-failure")
	failsWith(t, []string{"relay", "--database-url", pgtest.URL(), "--broker-url", "gopher://x"}, "unsupported scheme")
	failsWith(t, []string{"status", "--log-format", "xml", "--database-url", pgtest.URL()}, `--log-format "xml"`)
	failsWith(t, []string{"relay", "--log-level", "loud", "--database-url", pgtest.URL()}, `--log-level "loud"`)
	failsWith(t, []string{"nosuchcommand"}, "unknown command")
}

// Each broker by its URL scheme, end to end through the relay command, on
// the brokers that run here (NATS is covered by TestMigrateStatusRelay).
func TestRelayToRedisByURL(t *testing.T) {
	testenv.RequireTCP(t, "Redis at 127.0.0.1:6379", "127.0.0.1:6379")
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db := []string{"--database-url", pgtest.URL(), "--schema", schema}
	ctx := context.Background()
	if code, out, stderr := run(t, ctx, append([]string{"migrate"}, db...)...); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	d, _ := postgres.New(pool, &postgres.Config{Schema: schema})
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: []byte("1")})
	}); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("cli%d.", time.Now().UnixNano())
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	t.Cleanup(func() { rdb.Del(context.Background(), prefix+"orders") })
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		code, _, _ := run(t, rctx, append([]string{"relay", "--broker-url", "redis://127.0.0.1:6379/0?stream_prefix=" + prefix, "--poll-interval", "50ms"}, db...)...)
		done <- code
	}()
	deadline := time.Now().Add(30 * time.Second)
	for rdb.XLen(ctx, prefix+"orders").Val() != 1 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the event did not reach Redis stream %sorders", prefix)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("relay exit %d", code)
	}
}

func TestEnvironmentVariables(t *testing.T) {
	t.Setenv("OUTBOX_DATABASE_URL", "postgres://bob:s3cret@127.0.0.1:1/fromenv")
	failsWith(t, []string{"status"}, "127.0.0.1:1/fromenv")
	t.Setenv("OUTBOX_BATCH_SIZE", "many")
	failsWith(t, []string{"relay"}, "OUTBOX_BATCH_SIZE")
}

func TestMigratePrint(t *testing.T) {
	code, out, _ := run(t, context.Background(), "migrate", "--print", "--schema", "app", "--table", "events")
	want, _ := postgres.SchemaSQL(&postgres.Config{Schema: "app", Table: "events"})
	if code != 0 || out != want {
		t.Fatalf("migrate --print: exit %d, output:\n%s", code, out)
	}
}

// A user's session: the table is missing, they migrate, enqueue, look at
// status, run the relay, and the events arrive.
func TestMigrateStatusRelay(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	// Trust auth accepts any password: use one, to check it is never shown.
	dbURL := strings.Replace(pgtest.URL(), "postgres@", "postgres:s3cret@", 1)
	if !strings.Contains(dbURL, "s3cret") {
		t.Fatalf("could not add a password to %s", pgtest.URL())
	}
	db := []string{"--database-url", dbURL, "--schema", schema}
	ctx := context.Background()

	failsWith(t, append([]string{"status"}, db...), "run `outbox migrate`", schema+".messages")

	code, out, stderr := run(t, ctx, append([]string{"migrate"}, db...)...)
	if code != 0 || !strings.Contains(out, "is ready") || strings.Contains(out+stderr, "s3cret") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}

	d, _ := postgres.New(pool, &postgres.Config{Schema: schema})
	ob := outbox.New(d, nil)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return ob.Enqueue(ctx, tx,
			outbox.Message{Topic: "orders", Payload: []byte("1")},
			outbox.Message{Topic: "orders", Payload: []byte("2")},
			outbox.Message{Topic: "stock", Payload: []byte("3")})
	})
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, ctx, append([]string{"status"}, db...)...)
	if code != 0 || !regexpMatch(out, `(?m)^orders\s+2\s`) || !regexpMatch(out, `(?m)^stock\s+1\s`) || !regexpMatch(out, `(?m)^\(all\)\s+3\s`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}

	nc := natstest.Connect(t)
	stream := fmt.Sprintf("cli_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if s, err := natstest.JetStream(t, nc).Stream(context.Background(), stream); err == nil {
			_ = natstest.JetStream(t, nc).DeleteStream(context.Background(), s.CachedInfo().Config.Name)
		}
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var rcode int
	var rerr string
	go func() {
		defer close(done)
		rcode, _, rerr = run(t, rctx, append([]string{"relay", "--broker-url", natstest.URL(),
			"--subject-prefix", stream, "--stream", stream, "--poll-interval", "50ms"}, db...)...)
	}()
	js := natstest.JetStream(t, nc)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			if info, err := s.Info(ctx); err == nil && info.State.Msgs == 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("3 events did not reach stream %s; relay stderr:\n%s", stream, rerr)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cancel()
	<-done
	if rcode != 0 {
		t.Fatalf("relay exit %d:\n%s", rcode, rerr)
	}
	if strings.Contains(rerr, "s3cret") || !strings.Contains(rerr, "postgres:xxxxx@") {
		t.Fatalf("relay logs leak or omit the redacted URL:\n%s", rerr)
	}
	code, out, _ = run(t, ctx, append([]string{"status"}, db...)...)
	if code != 0 || !regexpMatch(out, `(?m)^\(all\)\s+0\s`) {
		t.Fatalf("status after relay: exit %d\n%s", code, out)
	}
}

// The same commands on SQLite: a file, no server.
func TestSQLiteMigrateStatus(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/outbox.db"
	ctx := context.Background()
	failsWith(t, []string{"status", "--database-url", url}, "does not exist", "run `outbox migrate`")
	if code, out, stderr := run(t, ctx, "migrate", "--database-url", url, "--table", "other"); code != 0 {
		t.Fatalf("migrate --table other: exit %d\n%s%s", code, out, stderr)
	}
	failsWith(t, []string{"status", "--database-url", url}, "run `outbox migrate`", "outbox_messages")
	code, out, stderr := run(t, ctx, "migrate", "--database-url", url)
	if code != 0 || !strings.Contains(out, "outbox_messages is ready") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, "status", "--database-url", url)
	if code != 0 || !regexpMatch(out, `(?m)^\(all\)\s+0\s`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, "migrate", "--print", "--database-url", url)
	if code != 0 || !strings.Contains(out, "outbox_messages") || strings.Contains(out, "jsonb") {
		t.Fatalf("migrate --print on sqlite printed:\n%s", out)
	}
}

// The same commands on MariaDB, in a database of the test's own.
func TestMySQLMigrateStatus(t *testing.T) {
	dbName := fmt.Sprintf("t_cli_%d", time.Now().UnixNano())
	admin, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/test")
	if err == nil {
		err = admin.Ping()
	}
	if err != nil {
		testenv.Unreachable(t, "MariaDB at 127.0.0.1:3306", err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE " + dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE " + dbName) })
	url := "mysql://root:s3cret@127.0.0.1:3306/" + dbName
	failsWith(t, []string{"status", "--database-url", url}, "cannot reach MySQL", "root:xxxxx@")
	url = "mysql://root@127.0.0.1:3306/" + dbName
	ctx := context.Background()
	failsWith(t, []string{"status", "--database-url", url}, "does not exist", "run `outbox migrate`")
	if code, out, stderr := run(t, ctx, "migrate", "--database-url", url, "--table", "other"); code != 0 {
		t.Fatalf("migrate --table other: exit %d\n%s%s", code, out, stderr)
	}
	failsWith(t, []string{"status", "--database-url", url}, "run `outbox migrate`", "outbox_messages")
	code, out, stderr := run(t, ctx, "migrate", "--database-url", url)
	if code != 0 || !strings.Contains(out, "outbox_messages is ready") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, "status", "--database-url", url)
	if code != 0 || !regexpMatch(out, `(?m)^\(all\)\s+0\s`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	failsWith(t, []string{"status", "--database-url", "mysql://root@127.0.0.1:3306"}, "no database name")
}

// Dead-letter by hand, list, replay: the operator's way past a stuck key.
func TestDeadLetterListReplay(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db := []string{"--database-url", pgtest.URL(), "--schema", schema}
	ctx := context.Background()
	if code, out, stderr := run(t, ctx, append([]string{"migrate"}, db...)...); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	id := outbox.NewID()
	d, _ := postgres.New(pool, &postgres.Config{Schema: schema})
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{ID: id, Topic: "orders", Key: "k"})
	}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, ctx, append([]string{"dead-letter", id.String(), "--reason", "stuck, skipped by ops"}, db...)...)
	if code != 0 || !strings.Contains(out, "dead-lettered 1 of 1") {
		t.Fatalf("dead-letter: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, append([]string{"dead"}, db...)...)
	if code != 0 || !strings.Contains(out, id.String()) || !strings.Contains(out, "stuck, skipped by ops") {
		t.Fatalf("dead: exit %d\n%s", code, out)
	}
	// A keyed event: replay says it goes out of order, and wants to be told.
	code, out, stderr = run(t, ctx, append([]string{"dead", "retry", "--all"}, db...)...)
	if code != 1 || !strings.Contains(out, "out of order: "+id.String()) || !strings.Contains(stderr, "--out-of-order") {
		t.Fatalf("replay without --out-of-order: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = run(t, ctx, append([]string{"dead", "retry", "--all", "--out-of-order"}, db...)...)
	if code != 0 || !strings.Contains(out, "retried 1 dead events") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, ctx, append([]string{"status"}, db...)...)
	if code != 0 || !regexpMatch(out, `(?m)^orders\s+1\s`) {
		t.Fatalf("status after replay: exit %d\n%s", code, out)
	}
}

// Without --broker-url the relay runs an embedded NATS JetStream: a new
// user's first relay needs nothing installed.
func TestRelayEmbeddedBroker(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + dir + "/app.db"
	ctx := context.Background()
	if code, out, stderr := run(t, ctx, "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	db, err := sqlite.Open(dir + "/app.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, _ := sqlite.New(db, nil)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	var stdout, stderr string
	go func() {
		code, out, errOut := run(t, rctx, "relay", "--database-url", url, "--data-dir", dir+"/nats",
			"--embedded-port", fmt.Sprint(port), "--poll-interval", "50ms")
		stdout, stderr = out, errOut
		done <- code
	}()
	deadline := time.Now().Add(30 * time.Second)
	var n uint64
	for n != 1 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the event did not reach the embedded broker's stream OUTBOX")
		}
		n = embeddedCount(ctx, fmt.Sprintf("nats://127.0.0.1:%d", port))
		if n != 1 {
			time.Sleep(50 * time.Millisecond) // polling a condition
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("relay exit %d", code)
	}
	if !strings.Contains(stdout, fmt.Sprintf("embedded NATS JetStream at nats://127.0.0.1:%d", port)) {
		t.Fatalf("the relay did not print the embedded broker's URL:\n%s", stdout)
	}
	// SQLite names the table outbox_messages, and so do the logs.
	if !strings.Contains(stderr, "table=outbox_messages") || strings.Contains(stderr, "table=outbox.messages") {
		t.Fatalf("the relay's log does not name the SQLite table:\n%s", stderr)
	}
}

// embeddedCount is how many messages stream OUTBOX holds at url; 0 when it
// cannot tell yet.
func embeddedCount(ctx context.Context, url string) uint64 {
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		return 0
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0
	}
	s, err := js.Stream(ctx, "OUTBOX")
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}
