// Package pgtest gives each test its own schema in the shared PostgreSQL.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/internal/testenv"
)

// DefaultURL is the shared test database; OUTBOX_TEST_DATABASE_URL overrides.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test database's URL.
func URL() string { return testenv.Getenv("OUTBOX_TEST_DATABASE_URL", DefaultURL) }

// Pool connects to the test database, or ends the test (skip, or fail in CI)
// when it is unreachable. The pool is closed at cleanup.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, URL())
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		testenv.Unreachable(t, "PostgreSQL at 127.0.0.1:5432 (OUTBOX_TEST_DATABASE_URL)", err)
		return nil
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema returns a new schema name unique to this test, dropped (with
// everything in it) at cleanup. The schema itself is not created: the
// store's Migrate does that.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var buf [4]byte
	_, _ = rand.Read(buf[:])
	name := "t_" + sanitize(t.Name()) + "_" + hex.EncodeToString(buf[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 24 {
			break
		}
	}
	return b.String()
}

// ExampleDB is Pool and Schema for a runnable example, which has no
// testing.T: a pool on the test database and a new schema name (the
// example creates it, through Migrate); done drops the schema and closes
// the pool. It exits the process when the database is unreachable
// (testenv.ExamplesNeed leaves the examples out of a run without it).
func ExampleDB() (pool *pgxpool.Pool, schema string, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, URL())
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		log.Fatalf("PostgreSQL at %s: %v", URL(), err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema = "example_" + hex.EncodeToString(b[:])
	return pool, schema, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			log.Printf("drop schema %s: %v", schema, err)
		}
		pool.Close()
	}
}
