package postgres

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"hash/fnv"
	"text/template"
)

// schemaSQL is the schema as a template over validated identifiers; the plain
// files under migrations/ are this template rendered with the defaults, for
// teams that migrate with goose, golang-migrate or atlas (a test keeps them
// equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg: idempotent statements
// that create the schema, the table and its indexes.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{
		"Schema": c.Schema,
		"Table":  c.Table,
	})
	return buf.String(), err
}

// migrateSQL is the DDL prefixed with an advisory lock, as one multi-statement
// string: PostgreSQL runs such a string in one implicit transaction, so
// relays starting together do not race each other's CREATE statements, and
// the same string works through pgx and through database/sql.
func migrateSQL(c Config) (string, error) {
	ddl, err := SchemaSQL(&c)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write([]byte("outbox-migrate:" + c.Schema + "." + c.Table))
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n%s", int64(h.Sum64()), ddl), nil
}

// Migrate creates the outbox schema through a database/sql handle (any
// PostgreSQL driver). Store.Migrate does the same through pgx.
func Migrate(ctx context.Context, db *sql.DB, cfg *Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	q, err := migrateSQL(c)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	return nil
}
