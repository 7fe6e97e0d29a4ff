package pginbox

import "github.com/outboxgo/outbox/stores"

// Config names the inbox table. The zero value means outbox.inbox.
type Config struct {
	// Schema holds the inbox table; Migrate creates it. Default "outbox".
	Schema string
	// Table is the inbox table's name. Default "inbox". Use one table per
	// consumer (see package inbox).
	Table string
}

// Defaults for Config.
const (
	DefaultSchema = "outbox"
	DefaultTable  = "inbox"
)

// maxIdentLen is PostgreSQL's NAMEDATALEN-1 less room for the index name
// derived from the table's.
const maxIdentLen = 40

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Schema == "" {
		out.Schema = DefaultSchema
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if err := stores.CheckIdent("pginbox: schema", out.Schema, maxIdentLen); err != nil {
		return out, err
	}
	if err := stores.CheckIdent("pginbox: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// table is the quoted, qualified table name of a validated Config.
func (c Config) table() string { return `"` + c.Schema + `"."` + c.Table + `"` }

// statements are the SQL a driver runs, built once from a validated Config.
type statements struct {
	record, purge, migrate string
}

func newStatements(c Config) (statements, error) {
	m, err := migrateSQL(c)
	if err != nil {
		return statements{}, err
	}
	t := c.table()
	return statements{
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES ($1::uuid, $2, $3) ON CONFLICT (id) DO NOTHING`,
		purge: `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t +
			` WHERE received_at < $1 ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		migrate: m,
	}, nil
}
