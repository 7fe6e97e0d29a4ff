package mysql

import (
	"time"

	"github.com/outboxgo/outbox/stores"
)

// Config names the outbox table. The zero value means outbox_messages, in the
// database the connection uses.
type Config struct {
	// Table is the outbox table's name, in the connection's database
	// (MySQL has no schema level below the database). Default
	// "outbox_messages".
	Table string
	// ClaimTimeout bounds how long a relay may hold a claim: a claim whose
	// connection sits idle this long in its transaction is killed by the
	// server, so a relay that stalls (SIGSTOP, a long GC pause) loses its
	// claim and its rows go to another relay. MariaDB enforces it with the
	// session's idle_transaction_timeout, MySQL with its wait_timeout; both
	// count whole seconds, so it is rounded up to a second. It must exceed
	// the relay's publish timeout. Default 30s.
	ClaimTimeout time.Duration
}

// Defaults for Config.
const (
	DefaultTable        = "outbox_messages"
	DefaultClaimTimeout = 30 * time.Second
)

// maxIdentLen is MySQL's and MariaDB's limit on a table name. Index names
// are fixed and scoped to the table, so the whole length is available.
const maxIdentLen = 64

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if out.ClaimTimeout <= 0 {
		out.ClaimTimeout = DefaultClaimTimeout
	}
	if err := stores.CheckIdent("mysql: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// quotedTable is the table name as it goes into SQL. The name was checked by
// CheckIdent, so it holds no backquote; quoting keeps reserved words usable.
func (c Config) quotedTable() string { return "`" + c.Table + "`" }

// keysTable names the key-lock table of the outbox table (see Driver.InsertTx):
// the table's name and "_keys", cut to fit MySQL's 64 bytes. Two outbox
// tables whose names share their first 59 bytes share it, which costs only
// some waiting: a shared row orders writers of two keys that need no order.
func (c Config) keysTable() string {
	const suffix = "_keys"
	return c.Table[:min(len(c.Table), maxIdentLen-len(suffix))] + suffix
}

// quotedKeysTable is keysTable as it goes into SQL.
func (c Config) quotedKeysTable() string { return "`" + c.keysTable() + "`" }

// idRows joins the table, as t, to the rows of a JSON array of hex ids (the
// first parameter), as f; see idsJSON.
func (c Config) idRows() string {
	return `JSON_TABLE(?, '$[*]' COLUMNS (id CHAR(32) PATH '$')) AS f STRAIGHT_JOIN ` +
		c.quotedTable() + ` AS t FORCE INDEX (id) ON t.id = UNHEX(f.id)`
}

// seconds rounds d up to whole seconds, at least one: the unit of the
// server's timeouts.
func seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
