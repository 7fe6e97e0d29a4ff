package postgres

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// Config names the tables and tunes the backend. Nil, and every zero field,
// means the default: the outbox table outbox.messages and the inbox table
// outbox.inbox.
type Config struct {
	// Schema holds both tables and the schema-version table; Migrate
	// creates it. Default "outbox".
	Schema string
	// Table is the outbox table's name. Default "messages".
	Table string
	// InboxTable is the inbox table's name. Default "inbox". Use one inbox
	// table per consumer (see package inbox): a Config per consumer, or a
	// DB per Config.
	InboxTable string
	// DisableNotify stops enqueueing, Replay and DeadLetter from sending a
	// NOTIFY on the outbox table's channel. Relays then find new events by
	// polling only. Default false: every enqueueing transaction notifies
	// once, at commit (see NotifyDebounce).
	DisableNotify bool
	// NotifyDebounce paces one process's NOTIFYs to one per interval on
	// average, with bursts of up to 10: a process that enqueues at a low
	// or uneven rate notifies on every transaction (the lowest latency),
	// one at a higher rate about once per interval, its other enqueues
	// skipping their NOTIFY (the relay's claim after a wake-up, and its
	// short linger, find those events). PostgreSQL takes a global lock at
	// the commit of a notifying transaction and holds it through the WAL
	// flush, so notifying on every transaction serializes concurrent
	// writers (see docs/relay.md for the figures). Each NOTIFY's payload
	// says how long, in microseconds, its process may now enqueue without
	// notifying: "0", or the interval from the one that took the last
	// token; relays look for events every few milliseconds during such a
	// spell only (Store.ListenQuiet). Default 10ms.
	NotifyDebounce time.Duration
	// NotifyEveryTx sends the NOTIFY with every enqueueing transaction,
	// whatever NotifyDebounce says: the lowest latency, at the cost above.
	// Default false.
	NotifyEveryTx bool
	// ClaimTimeout bounds how long a relay may hold a claim: the claiming
	// session's idle_in_transaction_session_timeout, so a relay that stalls
	// (SIGSTOP, a long GC pause) loses its claim and its rows go to another
	// relay. It must exceed the relay's publish timeout. Default 30s.
	ClaimTimeout time.Duration
	// Logger receives the backend's own logs: migrations applied, a lost
	// LISTEN connection. Default: discarded.
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultSchema         = "outbox"
	DefaultTable          = "messages"
	DefaultInboxTable     = "inbox"
	DefaultClaimTimeout   = 30 * time.Second
	DefaultNotifyDebounce = 10 * time.Millisecond
)

// VersionTable is the table, in Config.Schema, where Migrate records each
// table's schema version: one row per table (table_name, version,
// applied_at).
const VersionTable = "outbox_schema_versions"

// maxIdentLen is PostgreSQL's NAMEDATALEN-1, less room for the suffixes of
// the index and channel names derived from the table's.
const maxIdentLen = 40

// withDefaults returns a copy of c (which may be nil) with every zero field
// set to its default, or an error naming each field that is refused.
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
	if out.InboxTable == "" {
		out.InboxTable = DefaultInboxTable
	}
	if out.NotifyDebounce == 0 {
		out.NotifyDebounce = DefaultNotifyDebounce
	}
	if out.ClaimTimeout == 0 {
		out.ClaimTimeout = DefaultClaimTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out, out.validate()
}

// validate refuses names that are no plain identifiers (stores.ErrBadIdentifier)
// and negative durations.
func (c Config) validate() error {
	var errs []error
	for _, id := range []struct{ field, value string }{
		{"schema", c.Schema}, {"table", c.Table}, {"inbox table", c.InboxTable},
	} {
		if err := stores.CheckIdent("postgres: "+id.field, id.value, maxIdentLen); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	switch {
	case c.Table == c.InboxTable:
		errs = append(errs, fmt.Errorf("Table and InboxTable are both %q: the outbox and the inbox need a table each", c.Table))
	case c.Table == VersionTable || c.InboxTable == VersionTable:
		errs = append(errs, fmt.Errorf("%s is the schema-version table's name", VersionTable))
	}
	if c.NotifyDebounce < 0 {
		errs = append(errs, fmt.Errorf("NotifyDebounce %v: negative (NotifyEveryTx notifies on every transaction)", c.NotifyDebounce))
	}
	if c.ClaimTimeout < 0 {
		errs = append(errs, fmt.Errorf("ClaimTimeout %v: negative", c.ClaimTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("postgres: config: %w", err)
	}
	return nil
}

// names are the identifiers derived from a validated Config, quoted where
// they go into SQL.
type names struct {
	schema   string // "outbox"
	table    string // "outbox"."messages"
	inbox    string // "outbox"."inbox"
	versions string // "outbox"."outbox_schema_versions"
	channel  string // outbox_messages, a LISTEN/NOTIFY channel
	// enqueue is the enqueue function's name in the schema: enqueue for
	// the default table, <table>_enqueue for another.
	enqueue string
	// lockSpace is the first key of the advisory locks that order one
	// key's writers, so they do not collide with other tables' or the
	// application's own (which mostly use the one-bigint form).
	lockSpace int32
}

// enqueueFunc names the enqueue function of table (see
// schema/outbox/002_enqueue.up.sql): one per outbox table of a schema.
func enqueueFunc(table string) string {
	if table == DefaultTable {
		return "enqueue"
	}
	return table + "_enqueue"
}

func (c Config) names() names {
	q := func(table string) string { return `"` + c.Schema + `"."` + table + `"` }
	h := fnv.New32a()
	h.Write([]byte("outbox:" + c.Schema + "." + c.Table))
	return names{
		schema:    `"` + c.Schema + `"`,
		table:     q(c.Table),
		inbox:     q(c.InboxTable),
		versions:  q(VersionTable),
		channel:   c.Schema + "_" + c.Table,
		enqueue:   enqueueFunc(c.Table),
		lockSpace: int32(h.Sum32()),
	}
}
