package pginbox

import (
	"bytes"
	_ "embed"
	"fmt"
	"hash/fnv"
	"text/template"
)

// schemaSQL is the DDL as a template over validated identifiers; the plain
// files under migrations/ are this template rendered with the defaults (a
// test keeps them equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg: idempotent statements
// that create the schema, the inbox table and its index.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{"Schema": c.Schema, "Table": c.Table})
	return buf.String(), err
}

// migrateSQL is the DDL after a transaction-scoped advisory lock, as one
// multi-statement string that PostgreSQL runs in one implicit transaction:
// consumers starting together do not race each other's CREATE statements.
func migrateSQL(c Config) (string, error) {
	ddl, err := SchemaSQL(&c)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write([]byte("outbox-inbox-migrate:" + c.Schema + "." + c.Table))
	return fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n%s", int64(h.Sum64()), ddl), nil
}
