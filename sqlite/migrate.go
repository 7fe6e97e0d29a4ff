package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"text/template"
	"time"
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
	err = immediate(ctx, db, wait{until: time.Now().Add(maxLockWait)}, func(ctx context.Context, tx *wtx) error {
		_, err := tx.exec(ctx, ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	return nil
}
