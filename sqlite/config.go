package sqlite

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Config names the outbox and inbox tables and tunes the relay's store. A
// nil *Config, and a zero field, mean the default.
//
// SQLite has no schemas in PostgreSQL's sense (an attached database is the
// nearest thing), so each table is named by its name alone; to keep several
// outboxes or inboxes in one file, give each its own table name.
type Config struct {
	// Table is the outbox table's name; its indexes are named after it.
	// Default "outbox_messages" (DefaultTable).
	Table string
	// InboxTable is the inbox table's name; its index is named after it.
	// Use one inbox table per consumer (see package inbox). Default
	// "outbox_inbox" (DefaultInboxTable).
	InboxTable string
	// ClaimTimeout is the lease a claim takes: a claimed record is held
	// for this long after the claim's Now, and a relay that dies or stalls
	// past it loses the record to the next claim. It must exceed the
	// relay's publish timeout, or a slow publish lets a second relay
	// publish the same records. Default 30s (DefaultClaimTimeout).
	ClaimTimeout time.Duration
	// ListenInterval is how often Listen looks for new events: one cheap
	// read of the table's insert counter, which never waits for the writer.
	// Default 10ms (DefaultListenInterval).
	ListenInterval time.Duration
	// Clock dates the migrations applied (applied_at in the schema-version
	// table). Claims, completions and purges take their time from their
	// parameters, the relay's clock. Default outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the migrations applied, at level Info. Default: none
	// (discarded).
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultTable          = "outbox_messages"
	DefaultInboxTable     = "outbox_inbox"
	DefaultClaimTimeout   = stores.DefaultClaimTimeout
	DefaultListenInterval = 10 * time.Millisecond
)

// VersionTable is the table in which Migrate records the schema version of
// each table it migrated: one row per table (table_name, version,
// applied_at). It is shared by every outbox and inbox table of the file.
const VersionTable = "outbox_schema_versions"

// maxIdentLen leaves room for the suffixes of the index names derived from
// the table's, and keeps names portable to PostgreSQL's limit.
const maxIdentLen = 40

// validate rejects what no default can mend: a table name that is not a
// plain identifier, two tables of one name, a negative duration.
func (c *Config) validate() error {
	if err := stores.CheckIdent("sqlite: table", c.Table, maxIdentLen); err != nil {
		return err
	}
	if err := stores.CheckIdent("sqlite: inbox table", c.InboxTable, maxIdentLen); err != nil {
		return err
	}
	switch {
	case c.Table == c.InboxTable:
		return fmt.Errorf("sqlite: Table and InboxTable are both %q: the outbox and the inbox need a table each", c.Table)
	case c.Table == VersionTable || c.InboxTable == VersionTable:
		return fmt.Errorf("sqlite: %s is the schema-version table's name: choose another table name", VersionTable)
	case c.ClaimTimeout < 0:
		return fmt.Errorf("sqlite: ClaimTimeout is %v: it must not be negative (zero means %v)", c.ClaimTimeout, DefaultClaimTimeout)
	case c.ListenInterval < 0:
		return fmt.Errorf("sqlite: ListenInterval is %v: it must not be negative (zero means %v)", c.ListenInterval, DefaultListenInterval)
	}
	return nil
}

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
	if out.ListenInterval == 0 {
		out.ListenInterval = DefaultListenInterval
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if err := out.validate(); err != nil {
		return out, err
	}
	return out, nil
}

// quote is a validated table name, quoted for SQL.
func quote(name string) string { return `"` + name + `"` }
