package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
)

func TestMain(m *testing.M) {
	testenv.ExamplesNeed("MariaDB/MySQL", "127.0.0.1:3306")
	goleak.VerifyTestMain(m)
}

// exampleDB opens a database of the example's own, created on the test
// server (OUTBOX_TEST_MYSQL_DSN, as mysqltest) and dropped by the returned
// function: mysqltest needs a *testing.T, which an example has not. It
// panics on error, which fails the example.
func exampleDB(name string) (*sql.DB, func()) {
	cfg, err := gomysql.ParseDSN(testenv.Getenv("OUTBOX_TEST_MYSQL_DSN", mysqltest.DefaultDSN))
	check(err)
	cfg.ParseTime, cfg.Loc = true, time.UTC
	admin := openDSN(cfg)
	var buf [4]byte
	_, _ = rand.Read(buf[:])
	dbName := "example_" + name + "_" + hex.EncodeToString(buf[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = admin.ExecContext(ctx, "CREATE DATABASE `"+dbName+"`")
	check(err)
	c := cfg.Clone()
	c.DBName = dbName
	db := openDSN(c)
	return db, func() {
		_ = db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+dbName+"`")
		_ = admin.Close()
		check(err)
	}
}

func openDSN(cfg *gomysql.Config) *sql.DB {
	c, err := gomysql.NewConnector(cfg)
	check(err)
	return sql.OpenDB(c)
}

// check panics on an error: the examples' way to fail.
func check(err error) {
	if err != nil {
		panic(err)
	}
}
