package outboxcli_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
)

// The MySQL driver's own lines ("closing bad idle connection") reach the
// relay's log, in its format, not the driver's "[mysql]" logger; and the
// relay names the table as MySQL does, outbox_messages.
func TestMySQLDriverLogsThroughSlog(t *testing.T) {
	dbName := fmt.Sprintf("t_clilog_%d", time.Now().UnixNano())
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
	url := "mysql://root@127.0.0.1:3306/" + dbName
	if code, out, stderr := run(t, context.Background(), "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	prefix, _ := natstest.NewStream(t, natstest.Connect(t))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- mainWith(ctx, []string{"relay", "--database-url", url, "--broker-url", natstest.URL(), "--subject-prefix", prefix,
			"--poll-interval", "20ms", "--workers", "4"}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "msg=relaying") {
		select {
		case code := <-done:
			t.Fatalf("relay exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not start within 60s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	// Kill the relay's connections until the driver has logged one.
	for !strings.Contains(stderr.String(), "component=mysql-driver") {
		select {
		case code := <-done:
			t.Fatalf("relay exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line of the MySQL driver in the relay's log within 60s of killing its connections:\n%s", stderr.String())
		}
		rows, err := admin.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", dbName)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		_ = rows.Close()
		for _, id := range ids {
			_, _ = admin.Exec(fmt.Sprintf("KILL %d", id))
		}
		time.Sleep(50 * time.Millisecond) // polling a condition
	}
	cancel()
	<-done
	log := stderr.String()
	if !strings.Contains(log, "level=WARN") || strings.Contains(log, "[mysql]") {
		t.Errorf("the driver's lines are not the relay's:\n%s", log)
	}
	if !strings.Contains(log, "table=outbox_messages") || strings.Contains(log, "table=outbox.messages") {
		t.Errorf("the relay does not name the table as MySQL does:\n%s", log)
	}
}

// go-redis's pool lines ("failed to dial") reach the relay's log, in its
// format, instead of go-redis's own logger on the process's stderr.
func TestRedisPoolLogsThroughSlog(t *testing.T) {
	e := newSQLite(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	code, _, stderr := e.cli("relay", "--broker-url", "redis://"+addr+"/0", "--broker-wait", "1s", "--log-format", "json")
	if code != 1 || !regexpMatch(stderr, `(?m)^\{.*"level":"WARN".*"msg":"redis: connection pool: failed to dial.*"component":"go-redis"`) {
		t.Fatalf("exit %d; no go-redis line in the relay's log:\n%s", code, stderr)
	}
}
