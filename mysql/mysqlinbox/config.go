package mysqlinbox

import "github.com/outboxgo/outbox/stores"

// Config names the inbox table. The zero value means outbox_inbox, in the
// database the connection uses.
type Config struct {
	// Table is the inbox table's name, in the connection's database (MySQL
	// has no schema level below the database). Default "outbox_inbox". Use
	// one table per consumer (see package inbox).
	Table string
}

// DefaultTable is Config.Table's default.
const DefaultTable = "outbox_inbox"

// maxIdentLen is MySQL's and MariaDB's limit on a table name. The index
// name is fixed and scoped to the table, so the whole length is available.
const maxIdentLen = 64

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if err := stores.CheckIdent("mysqlinbox: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// table is the quoted table name of a validated Config. CheckIdent leaves
// no backquote in it; quoting keeps reserved words usable.
func (c Config) table() string { return "`" + c.Table + "`" }

// statements are the SQL a driver runs, built once from a validated Config.
type statements struct {
	record, purgeSelect, purgeDelete string
	migrate                          []string
}

func newStatements(c Config) (statements, error) {
	ddl, err := SchemaSQL(&c)
	if err != nil {
		return statements{}, err
	}
	t := c.table()
	return statements{
		// A plain INSERT: a duplicate fails with ER_DUP_ENTRY, which
		// RecordTx tells apart from every other error. INSERT IGNORE would
		// also turn other errors (a value too long, bad UTF-8) into
		// warnings, and ON DUPLICATE KEY UPDATE reports a found row as one
		// affected row when the DSN sets clientFoundRows.
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES (?, ?, ?)`,
		// MySQL takes neither LIMIT in an IN subquery nor a locking
		// subquery on the table it deletes from: Purge selects the ids,
		// then deletes them by primary key (see idsJSON).
		purgeSelect: `SELECT id FROM ` + t + ` FORCE INDEX (received_at)
			WHERE received_at < ? ORDER BY received_at LIMIT ? FOR UPDATE SKIP LOCKED`,
		purgeDelete: `DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (id CHAR(32) PATH '$')) AS f
			STRAIGHT_JOIN ` + t + ` AS t FORCE INDEX (PRIMARY) ON t.id = UNHEX(f.id)`,
		migrate: splitStatements(ddl),
	}, nil
}
