package mysqlinbox

import (
	"bytes"
	_ "embed"
	"strings"
	"text/template"
)

// schemaSQL is the DDL as a template over a validated table name; the plain
// file under migrations/ is this template rendered with the default (a test
// keeps them equal).
//
//go:embed schema.sql.tmpl
var schemaSQL string

var schemaTmpl = template.Must(template.New("schema").Parse(schemaSQL))

// SchemaSQL returns the DDL that Migrate runs for cfg (nil: the defaults):
// an idempotent CREATE TABLE of the inbox table, with its index inside, in
// the current database.
func SchemaSQL(cfg *Config) (string, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = schemaTmpl.Execute(&buf, map[string]string{"Table": c.Table})
	return buf.String(), err
}

// splitStatements splits a script of ours into its statements, for a
// driver that sends one at a time (go-sql-driver/mysql without
// multiStatements): each ends with a semicolon at the end of a line, and
// pieces with nothing but comments are dropped. It is not a general SQL
// splitter; the schema template is written for it.
func splitStatements(script string) []string {
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
