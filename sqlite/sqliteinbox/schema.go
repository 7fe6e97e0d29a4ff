package sqliteinbox

import (
	"bytes"
	_ "embed"
	"text/template"
)

// schemaSQL is the DDL as a template over a validated table name; the plain
// files under migrations/ are this template rendered with the default (a
// test keeps them equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg (nil: the defaults):
// idempotent statements that create the inbox table and its index.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{"Table": c.Table})
	return buf.String(), err
}
