package sqlite

import (
	"time"

	"github.com/outboxgo/outbox/stores"
)

// Config names the outbox table. The zero value means outbox_messages.
//
// SQLite has no schemas in PostgreSQL's sense (an attached database is the
// nearest thing), so the table is named by Table alone; to keep several
// outboxes in one file, give each its own table name.
type Config struct {
	// Table is the outbox table's name; its indexes are named after it.
	// Default "outbox_messages".
	Table string
	// ClaimTimeout is the lease a claim takes: a claimed record is held
	// for this long after the claim's Now, and a relay that dies or stalls
	// past it loses the record to the next claim. It must exceed the
	// relay's publish timeout, or a slow publish lets a second relay
	// publish the same records. Default 30s.
	ClaimTimeout time.Duration
	// ListenInterval is how often Listen looks for new events: one cheap
	// read of the table's insert counter, which never waits for the writer.
	// Default 10ms.
	ListenInterval time.Duration
}

// Defaults for Config.
const (
	DefaultTable          = "outbox_messages"
	DefaultClaimTimeout   = 30 * time.Second
	DefaultListenInterval = 10 * time.Millisecond
)

// maxIdentLen leaves room for the suffixes of the index names derived from
// the table's, and keeps names portable to PostgreSQL's limit.
const maxIdentLen = 40

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
	if out.ListenInterval <= 0 {
		out.ListenInterval = DefaultListenInterval
	}
	if err := stores.CheckIdent("sqlite: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// table is the quoted table name, for SQL.
func (c Config) table() string { return `"` + c.Table + `"` }
