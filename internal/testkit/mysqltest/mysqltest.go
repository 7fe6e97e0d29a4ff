// Package mysqltest gives tests a MariaDB/MySQL database of their own on
// the shared test server.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/internal/testenv"
)

// DefaultDSN is the shared test server; OUTBOX_TEST_MYSQL_DSN overrides
// it. Its database is used only to create and drop each test's own.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/test"

// Open connects to a new database of the test's own, created on the
// shared server and dropped at cleanup, or ends the test (skip, or fail in
// CI) when the server is unreachable. Sessions are UTC (loc=UTC,
// time_zone='+00:00') with parseTime=true.
func Open(t testing.TB) *sql.DB {
	t.Helper()
	return NewDatabase(t)()
}

// NewDatabase creates a database of the test's own, as Open does,
// and returns a function that opens handles on it, closed at cleanup. Each
// opt edits the DSN of that handle.
func NewDatabase(t testing.TB) func(opts ...func(*mysql.Config)) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.Getenv("OUTBOX_TEST_MYSQL_DSN", DefaultDSN))
	if err != nil {
		t.Fatalf("OUTBOX_TEST_MYSQL_DSN: %v", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"

	admin, err := open(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err == nil {
		err = admin.PingContext(ctx)
		if err != nil {
			_ = admin.Close()
		}
	}
	if err != nil {
		testenv.Unreachable(t, "MariaDB at 127.0.0.1:3306 (OUTBOX_TEST_MYSQL_DSN)", err)
		return nil // not reached: Unreachable ends the test
	}
	t.Cleanup(func() { _ = admin.Close() })

	var buf [4]byte
	_, _ = rand.Read(buf[:])
	name := "t_" + sanitize(t.Name()) + "_" + hex.EncodeToString(buf[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})

	return func(opts ...func(*mysql.Config)) *sql.DB {
		t.Helper()
		c := cfg.Clone()
		c.DBName = name
		for _, o := range opts {
			o(c)
		}
		db, err := open(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() }) // before the drop: cleanups run last first
		return db
	}
}

func open(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// sanitize makes a test name fit in a database name: at most 40 of its
// lowercase letters and digits, the rest as underscores.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
