package mysql

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Config names the tables and bounds the claims. The zero value (or a nil
// *Config) means every default: the tables outbox_messages and
// outbox_inbox, in the database the connection uses.
type Config struct {
	// Table is the outbox table's name, in the connection's database
	// (MySQL has no schema level below the database). Its key-lock table
	// is Table + "_keys" (see DB.InsertTx). Default "outbox_messages".
	Table string
	// InboxTable is the inbox table's name, in the connection's database.
	// Use one table per consumer (see package inbox). Default
	// "outbox_inbox".
	InboxTable string
	// ClaimTimeout bounds how long a relay may hold a claim: a claim whose
	// connection sits idle this long in its transaction is killed by the
	// server, so a relay that stalls (SIGSTOP, a long GC pause) loses its
	// claim and its rows go to another relay. MariaDB enforces it with the
	// session's idle_transaction_timeout, MySQL with its wait_timeout; both
	// count whole seconds, so it is rounded up to a second. It must exceed
	// the relay's publish timeout. Default 30s (DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// Clock stamps the applied_at of the migrations Migrate records (the
	// events' times come from the outbox, the relay and the inbox).
	// Default outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives what the store does on its own: migrations applied,
	// a claim connection closed because its session could not be restored.
	// Default: discarded.
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultTable        = "outbox_messages"
	DefaultInboxTable   = "outbox_inbox"
	DefaultClaimTimeout = stores.DefaultClaimTimeout
)

// VersionTable is the table where Migrate records the schema version of
// each table it manages, one row per table (table_name, version,
// applied_at), in the connection's database. Every outbox and inbox table
// of a database shares it.
const VersionTable = "outbox_schema_versions"

// maxIdentLen is MySQL's and MariaDB's limit on a table name. Index names
// are fixed and scoped to the table, so the whole length is available.
const maxIdentLen = 64

// withDefaults returns a copy of c (which may be nil) with every zero field
// set to its default, validated.
func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if out.InboxTable == "" {
		out.InboxTable = DefaultInboxTable
	}
	if out.ClaimTimeout == 0 {
		out.ClaimTimeout = DefaultClaimTimeout
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, out.validate()
}

// validate checks a Config whose defaults are applied: plain identifiers
// (what makes splicing them into SQL safe), four distinct tables, no
// negative duration.
func (c Config) validate() error {
	for _, n := range []struct{ what, name string }{
		{"mysql: table", c.Table}, {"mysql: inbox table", c.InboxTable},
	} {
		if err := stores.CheckIdent(n.what, n.name, maxIdentLen); err != nil {
			return err
		}
	}
	names := map[string]string{}
	for _, n := range []struct{ field, name string }{
		{"Config.Table", c.Table}, {"Config.Table's key-lock table", c.keysTable()},
		{"Config.InboxTable", c.InboxTable}, {"the version table", VersionTable},
	} {
		if other, dup := names[n.name]; dup {
			return fmt.Errorf("mysql: %s and %s are both the table %q", other, n.field, n.name)
		}
		names[n.name] = n.field
	}
	if c.ClaimTimeout < 0 {
		return fmt.Errorf("mysql: Config.ClaimTimeout is %v, must not be negative", c.ClaimTimeout)
	}
	return nil
}

// quote is a table name as it goes into SQL. The name was checked by
// CheckIdent, so it holds no backquote; quoting keeps reserved words usable.
func quote(table string) string { return "`" + table + "`" }

// quotedTable is the outbox table as it goes into SQL.
func (c Config) quotedTable() string { return quote(c.Table) }

// keysTable names the key-lock table of the outbox table (see DB.InsertTx):
// the table's name and "_keys", cut to fit MySQL's 64 bytes. Two outbox
// tables whose names share their first 59 bytes share it, which costs only
// some waiting: a shared row orders writers of two keys that need no order.
func (c Config) keysTable() string {
	const suffix = "_keys"
	return c.Table[:min(len(c.Table), maxIdentLen-len(suffix))] + suffix
}

// routine names a stored routine of the outbox table: the table's name and
// suffix ("_enqueue"), or, when that would pass MySQL's 64 bytes, the name
// cut short with a hash of the whole name between, so that two tables never
// share one.
func (c Config) routine(suffix string) string {
	if len(c.Table)+len(suffix) <= maxIdentLen {
		return c.Table + suffix
	}
	h := fnv.New32a()
	h.Write([]byte(c.Table))
	tag := fmt.Sprintf("_%08x", h.Sum32())
	return c.Table[:maxIdentLen-len(suffix)-len(tag)] + tag + suffix
}

// quotedKeysTable is keysTable as it goes into SQL.
func (c Config) quotedKeysTable() string { return quote(c.keysTable()) }

// idRows joins the outbox table, as t, to the rows of a JSON array of hex
// ids (the first parameter), as f; see sqlkit.IDsJSON.
func (c Config) idRows() string {
	return `JSON_TABLE(?, '$[*]' COLUMNS (id CHAR(32) PATH '$')) AS f STRAIGHT_JOIN ` +
		c.quotedTable() + ` AS t FORCE INDEX (id) ON t.id = UNHEX(f.id)`
}

// seconds rounds d up to whole seconds, at least one: the unit of the
// server's timeouts.
func seconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}
