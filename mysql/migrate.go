package mysql

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"
	"text/template"
)

// schemaSQL is the schema as a template over validated identifiers; the plain
// file under migrations/ is this template rendered with the defaults, for
// teams that migrate with goose, golang-migrate or atlas (a test keeps them
// equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg: idempotent statements
// that create the table and its indexes in the current database.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{"Table": c.Table, "Keys": c.keysTable()})
	return buf.String(), err
}

// Migrate creates the outbox table in the connection's database. It is
// idempotent (CREATE TABLE IF NOT EXISTS, with the indexes inside it), so
// relays starting together may all run it.
func Migrate(ctx context.Context, db *sql.DB, cfg *Config) error {
	ddl, err := SchemaSQL(cfg)
	if err != nil {
		return err
	}
	// The driver sends one statement at a time unless the DSN enables
	// multiStatements, so run them one by one.
	for _, q := range statements(ddl) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysql: migrate: %w", err)
		}
	}
	return nil
}

// statements splits a script of ours into its statements: each ends with a
// semicolon at the end of a line, and pieces with nothing but comments are
// dropped. It is not a general SQL splitter; the schema template is written
// for it.
func statements(script string) []string {
	var out []string
	for _, part := range strings.SplitAfter(script, ";\n") {
		code := false
		for _, line := range strings.Split(part, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
				code = true
				break
			}
		}
		if code {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(part), ";"))
		}
	}
	return out
}
