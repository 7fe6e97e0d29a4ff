package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	_ "embed"
	"fmt"
	"text/template"
)

// schemaSQL is the schema as a template over a validated table name; the
// plain file migrations/001_outbox.up.sql is this template rendered with the
// default, for teams that migrate with goose, golang-migrate or atlas (a test
// keeps them equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg: idempotent statements
// that create the table and its indexes.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{"Table": c.Table})
	return buf.String(), err
}

// Migrate creates the outbox table and its indexes in db, in one IMMEDIATE
// transaction, so that relays starting together do not race each other's
// CREATE statements. Store.Migrate does the same.
func Migrate(ctx context.Context, db *sql.DB, cfg *Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	return migrate(ctx, db, c)
}

func migrate(ctx context.Context, db *sql.DB, c Config) error {
	ddl, err := SchemaSQL(&c)
	if err != nil {
		return err
	}
	err = immediate(ctx, db, func(ctx context.Context, conn *sql.Conn) error {
		_, err := conn.ExecContext(ctx, ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}

// immediate runs f inside BEGIN IMMEDIATE … COMMIT on one connection of db.
// IMMEDIATE takes SQLite's write lock at BEGIN (waiting under the
// connection's busy_timeout), so f never fails halfway for want of the lock,
// whatever _txlock the caller's DSN sets. f must be short: every writer on
// the database waits for it.
func immediate(ctx context.Context, db *sql.DB, f func(ctx context.Context, conn *sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if err = f(ctx, conn); err == nil {
		// The work is done: commit it even if ctx ended meanwhile.
		if _, err = conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err == nil {
			return nil
		}
	}
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		// SQLite may have rolled back by itself already; if not, the
		// connection is still in a transaction. Either way, do not give
		// it back to the pool.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}
