package pgcdc

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
)

// Mode says what the relay does with the rows of the events it published.
type Mode int

const (
	// MarkRows (the default) deletes each published event's row, in
	// batches, or with Config.Retention marks it published (status 1) and
	// purges it later, so `outbox status` stays true.
	MarkRows Mode = iota
	// InsertDelete is for applications that insert each event and delete
	// it in the same transaction: the table stays empty and the write-ahead
	// log still carries the insert. The relay writes nothing for a
	// published event and never fails on a missing row; it writes a dead
	// event's row back (status 2), and a delayed event's row back (pending)
	// until it is due.
	InsertDelete
)

// String returns "mark" or "insert-delete".
func (m Mode) String() string {
	if m == InsertDelete {
		return "insert-delete"
	}
	return "mark"
}

// ParseMode parses "mark" or "insert-delete".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "mark", "":
		return MarkRows, nil
	case "insert-delete":
		return InsertDelete, nil
	}
	return 0, fmt.Errorf("pgcdc: mode %q: want mark or insert-delete", s)
}

// Config configures a Relay. Only ConnString is required; every other field
// documents its default.
type Config struct {
	// ConnString is the PostgreSQL URL or keyword/value string of the
	// database holding the outbox table. The role needs the REPLICATION
	// attribute (or to own the table and the publication on a managed
	// service's equivalent). The relay adds replication=database for its
	// streaming session and opens a small pool for its SQL. Required.
	ConnString string
	// Schema and Table name the outbox table. Default "outbox" and
	// "messages" (postgres.DefaultSchema, postgres.DefaultTable).
	Schema, Table string
	// Publication is the publication the relay creates (FOR TABLE the
	// outbox, publish = 'insert') or reuses. Default "outbox_cdc".
	Publication string
	// Slot is the logical replication slot (pgoutput) the relay creates or
	// reuses. Its confirmed position is the relay's only state: a relay
	// that restarts resumes there. Default "outbox_cdc".
	Slot string
	// Mode is what the relay does with published rows. Default MarkRows.
	Mode Mode
	// Debezium, when set, streams a Debezium-style outbox table instead
	// (see DebeziumTable); Schema and Table then name this project's outbox
	// table, which receives the dead events. Mode must be InsertDelete
	// (the relay writes nothing to the Debezium table). Default nil.
	Debezium *DebeziumTable
	// Retention, in MarkRows mode, keeps published rows marked published
	// (status 1) for this long, then purges them in batches every
	// PurgeInterval. Default 0: delete them once published.
	Retention time.Duration
	// PurgeInterval: see Retention. Default 1m.
	PurgeInterval time.Duration

	// Window bounds the decoded events held in memory, published or not
	// yet confirmed; the relay stops reading the stream when it is full.
	// Default 10000.
	Window int
	// BatchSize is the most events one Publish call carries. Default 1000.
	BatchSize int
	// Calls is how many Publish calls may be in flight at once. Default 4.
	Calls int
	// PerKey is, for a publisher that keeps key order
	// (publishers.OrderKeeper), how many consecutive events of one key a
	// call may carry. Other publishers get one event of a key in flight at
	// a time. Default 1000.
	PerKey int
	// PublishTimeout bounds one Publish call. Default 10s.
	PublishTimeout time.Duration
	// MaxAttempts is how many failed publishes make an event dead (see
	// KeyedFailure). Default 10.
	MaxAttempts int
	// KeyedFailure is what a failing keyed event does to its key, as in
	// the polling relay: relay.BlockKey (the default) retries it for ever
	// with RetryBackoff, holding its key's later events (other keys flow),
	// until it succeeds or is dead-lettered by hand (`outbox dead-letter
	// ID`: the relay then drops it at its next failure and lets the key
	// go on); relay.DeadLetterKey makes it dead after MaxAttempts (at once
	// when the broker rejects it permanently) and lets the key go on.
	// Unkeyed events always follow the dead-letter rule.
	KeyedFailure relay.FailurePolicy
	// RetryBackoff spaces an event's retries. Default 1s to 5m, jitter 0.2.
	RetryBackoff outbox.Backoff
	// OutageBackoff spaces the probes of a broker that is unavailable or
	// refuses the configuration; the stream pauses meanwhile. Default
	// 250ms to 30s, jitter 0.2.
	OutageBackoff outbox.Backoff
	// MarkInterval is how long acknowledged events wait to be marked
	// together in one statement. Default 20ms.
	MarkInterval time.Duration
	// StatusInterval is how often the relay sends the server a standby
	// status update confirming what is published (and answers at once
	// when the server asks). Default 1s; it must be well under the
	// server's wal_sender_timeout (60s by default).
	StatusInterval time.Duration
	// HeartbeatInterval is how often the relay writes a heartbeat to the
	// log (pg_logical_emit_message), so that the slot's confirmed
	// position advances on an idle outbox and the slot pins no WAL.
	// Default 10s; negative turns heartbeats off.
	HeartbeatInterval time.Duration
	// PollInterval is how often the relay looks for delayed events
	// (NotBefore) that have come due. Default 1s: a delayed event is
	// published up to PollInterval after its time, never before.
	PollInterval time.Duration
	// StandbyRetry is how often a relay whose slot another relay holds
	// tries to take it over (a hot standby). Default 1s.
	StandbyRetry time.Duration
	// ShutdownTimeout is how long Run waits for in-flight events when its
	// context ends. Default 30s.
	ShutdownTimeout time.Duration
	// Clock stamps what the relay writes. Default outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the relay's logs. Default: discarded.
	Logger *slog.Logger
	// Hooks observe the relay; all optional.
	Hooks Hooks
}

// Hooks observe the relay. They run on the relay's goroutines: keep them
// quick.
type Hooks struct {
	// AfterPublish is called when a Publish call has returned, before its
	// results are acted on, with one result per message.
	AfterPublish func(msgs []outbox.Message, errs []error)
	// AfterConfirm is called after a standby status update confirmed lsn.
	AfterConfirm func(lsn string)
}

// Defaults for Config.
const (
	DefaultPublication       = "outbox_cdc"
	DefaultSlot              = "outbox_cdc"
	DefaultWindow            = 10000
	DefaultBatchSize         = 1000
	DefaultCalls             = 4
	DefaultPerKey            = 1000
	DefaultPublishTimeout    = 10 * time.Second
	DefaultMaxAttempts       = 10
	DefaultMarkInterval      = 20 * time.Millisecond
	DefaultStatusInterval    = time.Second
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultPollInterval      = time.Second
	DefaultStandbyRetry      = time.Second
	DefaultPurgeInterval     = time.Minute
	DefaultShutdownTimeout   = 30 * time.Second
)

var nameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	str := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	num := func(n *int, v int) {
		if *n == 0 {
			*n = v
		}
	}
	dur := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	str(&out.Schema, "outbox")
	str(&out.Table, "messages")
	str(&out.Publication, DefaultPublication)
	str(&out.Slot, DefaultSlot)
	num(&out.Window, DefaultWindow)
	num(&out.BatchSize, DefaultBatchSize)
	num(&out.Calls, DefaultCalls)
	num(&out.PerKey, DefaultPerKey)
	num(&out.MaxAttempts, DefaultMaxAttempts)
	dur(&out.PublishTimeout, DefaultPublishTimeout)
	dur(&out.MarkInterval, DefaultMarkInterval)
	dur(&out.StatusInterval, DefaultStatusInterval)
	dur(&out.HeartbeatInterval, DefaultHeartbeatInterval)
	dur(&out.PollInterval, DefaultPollInterval)
	dur(&out.StandbyRetry, DefaultStandbyRetry)
	dur(&out.PurgeInterval, DefaultPurgeInterval)
	dur(&out.ShutdownTimeout, DefaultShutdownTimeout)
	if out.RetryBackoff == (outbox.Backoff{}) {
		out.RetryBackoff = relay.DefaultRetryBackoff
	}
	if out.OutageBackoff == (outbox.Backoff{}) {
		out.OutageBackoff = relay.DefaultOutageBackoff
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if out.ConnString == "" {
		errs = append(errs, errors.New("ConnString is required"))
	}
	for _, n := range []struct{ what, v string }{{"Publication", out.Publication}, {"Slot", out.Slot}} {
		if !nameRE.MatchString(n.v) {
			errs = append(errs, fmt.Errorf("%s %q: want lower-case letters, digits and _ (at most 63)", n.what, n.v))
		}
	}
	if out.Mode != MarkRows && out.Mode != InsertDelete {
		errs = append(errs, fmt.Errorf("Mode %d: want MarkRows or InsertDelete", out.Mode))
	}
	if out.Mode == InsertDelete && out.Retention > 0 {
		errs = append(errs, errors.New("Retention applies to MarkRows mode only: in InsertDelete mode the application deletes the rows"))
	}
	if out.Debezium != nil {
		d := out.Debezium.withDefaults()
		out.Debezium = &d
		if out.Mode != InsertDelete {
			errs = append(errs, errors.New("Debezium needs Mode InsertDelete: the relay writes nothing to a Debezium table"))
		}
		if d.Schema == out.Schema && d.Table == out.Table {
			errs = append(errs, errors.New("Debezium's table and Schema/Table are the same: Schema/Table name this project's outbox table, for dead events"))
		}
	}
	if out.KeyedFailure != relay.BlockKey && out.KeyedFailure != relay.DeadLetterKey {
		errs = append(errs, fmt.Errorf("KeyedFailure %d: want relay.BlockKey or relay.DeadLetterKey", out.KeyedFailure))
	}
	if out.Window < 0 || out.BatchSize < 0 || out.Calls < 0 || out.PerKey < 0 || out.MaxAttempts < 0 {
		errs = append(errs, errors.New("Window, BatchSize, Calls, PerKey and MaxAttempts must be positive"))
	}
	if out.Retention < 0 || out.PublishTimeout < 0 || out.MarkInterval < 0 || out.StatusInterval < 0 ||
		out.PollInterval < 0 || out.StandbyRetry < 0 || out.PurgeInterval < 0 || out.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative (HeartbeatInterval excepted: negative turns heartbeats off)"))
	}
	for _, b := range []outbox.Backoff{out.RetryBackoff, out.OutageBackoff} {
		if b.Min <= 0 || b.Max < b.Min || b.Jitter < 0 || b.Jitter > 1 {
			errs = append(errs, fmt.Errorf("backoff %+v: want 0 < Min ≤ Max and 0 ≤ Jitter ≤ 1", b))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("pgcdc: config: %w", err)
	}
	return out, nil
}
