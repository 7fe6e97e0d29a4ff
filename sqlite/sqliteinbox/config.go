package sqliteinbox

import "github.com/outboxgo/outbox/stores"

// Config names the inbox table. The zero value means outbox_inbox.
type Config struct {
	// Table is the inbox table's name; its index is named after it.
	// Default "outbox_inbox". Use one table per consumer (see package
	// inbox). SQLite has no schemas: the name alone places the table.
	Table string
}

// DefaultTable is Config.Table's default.
const DefaultTable = "outbox_inbox"

// maxIdentLen leaves room for the index name derived from the table's.
const maxIdentLen = 40

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if err := stores.CheckIdent("sqliteinbox: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// table is the quoted table name of a validated Config.
func (c Config) table() string { return `"` + c.Table + `"` }

// statements are the SQL a driver runs, built once from a validated Config.
type statements struct {
	record, purge, migrate string
}

func newStatements(c Config) (statements, error) {
	m, err := SchemaSQL(&c)
	if err != nil {
		return statements{}, err
	}
	t := c.table()
	return statements{
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES (?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		purge: `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t +
			` WHERE received_at < ? ORDER BY received_at LIMIT ?)`,
		migrate: m,
	}, nil
}
