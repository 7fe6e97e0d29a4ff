package postgres

import (
	"hash/fnv"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// Config names the outbox table. The zero value means outbox.messages.
type Config struct {
	// Schema holds the outbox table; Migrate creates it. Default "outbox".
	Schema string
	// Table is the outbox table's name. Default "messages".
	Table string
	// DisableNotify stops Enqueue from sending a NOTIFY on the table's
	// channel. Relays then find new events by polling only. Default false:
	// every enqueueing transaction notifies once, at commit.
	DisableNotify bool
	// NotifyDebounce lets one process send at most one NOTIFY per interval:
	// an Enqueue within the interval after another skips its NOTIFY (the
	// relay's claim after the first wake-up, and its short linger, find the
	// event). PostgreSQL takes a global lock at the commit of a notifying
	// transaction and holds it through the WAL flush, so notifying on every
	// transaction serializes concurrent writers (see docs/relay.md for the
	// figures). Default 10ms; negative: notify on every transaction.
	NotifyDebounce time.Duration
	// ClaimTimeout bounds how long a relay may hold a claim: the claiming
	// session's idle_in_transaction_session_timeout, so a relay that stalls
	// (SIGSTOP, a long GC pause) loses its claim and its rows go to another
	// relay. It must exceed the relay's publish timeout. Default 30s.
	ClaimTimeout time.Duration
}

// Defaults for Config.
const (
	DefaultSchema       = "outbox"
	DefaultTable        = "messages"
	DefaultClaimTimeout = 30 * time.Second
	// DefaultNotifyDebounce is Config.NotifyDebounce's default.
	DefaultNotifyDebounce = 10 * time.Millisecond
)

// maxIdentLen is PostgreSQL's NAMEDATALEN-1, less room for the suffixes of
// the index and channel names derived from the table's.
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
	if out.NotifyDebounce == 0 {
		out.NotifyDebounce = DefaultNotifyDebounce
	}
	if out.ClaimTimeout <= 0 {
		out.ClaimTimeout = DefaultClaimTimeout
	}
	if err := stores.CheckIdent("postgres: schema", out.Schema, maxIdentLen); err != nil {
		return out, err
	}
	if err := stores.CheckIdent("postgres: table", out.Table, maxIdentLen); err != nil {
		return out, err
	}
	return out, nil
}

// names are the identifiers derived from a validated Config, quoted where
// they go into SQL.
type names struct {
	schema  string // "outbox"
	table   string // "outbox"."messages"
	channel string // outbox_messages, a LISTEN/NOTIFY channel
	index   string // messages_pending
	// lockSpace is the first key of the advisory locks that order one
	// key's writers, so they do not collide with other tables' or the
	// application's own (which mostly use the one-bigint form).
	lockSpace int32
}

func (c Config) names() names {
	return names{
		schema:  `"` + c.Schema + `"`,
		table:   `"` + c.Schema + `"."` + c.Table + `"`,
		channel: c.Schema + "_" + c.Table,
		index:   c.Table + "_pending",
		lockSpace: func() int32 {
			h := fnv.New32a()
			h.Write([]byte("outbox:" + c.Schema + "." + c.Table))
			return int32(h.Sum32())
		}(),
	}
}
