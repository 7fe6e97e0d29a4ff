package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox"
)

// Config tunes a Relay. The zero value is ready to use; every field documents
// its default.
type Config struct {
	// BatchSize is the most events one claim takes. Default 1000. Memory is
	// bounded by Workers × BatchSize events, whatever the backlog.
	BatchSize int
	// Workers is how many claim → publish → complete loops run at once.
	// While one publishes, another claims. Default 2.
	Workers int
	// PollInterval is how often an idle relay looks for due events when no
	// wake-up arrives (LISTEN/NOTIFY, Wake). Default 1s; it also bounds how
	// late a delayed or retried event may be picked up.
	PollInterval time.Duration
	// PublishTimeout bounds one batch's publish, acknowledgements included.
	// A batch not acknowledged in time counts as a broker outage. It must be
	// shorter than the store's claim timeout (stores.Store.ClaimTimeout):
	// New refuses it otherwise. Default 10s.
	PublishTimeout time.Duration
	// StoreTimeout bounds each call to the store (a claim, a completion),
	// so a database call that hangs becomes a store error the worker logs,
	// counts and retries with backoff, instead of a worker blocked for
	// good. A completion that times out leaves its events pending: they are
	// published again (duplicates, never losses). Default 30s.
	StoreTimeout time.Duration
	// MaxAttempts is how many failed publishes make an event dead. An
	// outage does not count; a permanent rejection makes it dead at once.
	// Default 10.
	MaxAttempts int
	// Unordered turns per-key order off: every due event may be published
	// at once, whatever its key. Default false: events with a non-empty
	// key are published one at a time per key, in the order their
	// transactions committed, across any number of relays (see the package
	// doc); unkeyed events always take the unordered path.
	Unordered bool
	// PerKey is how many consecutive events of one key a batch may take
	// in ordered mode; a claim shares the batch's room evenly among the
	// keys it finds. They are published one after another, each once the
	// broker has acknowledged the one before, while the events of other
	// keys go out alongside; the whole batch is then marked in one
	// statement. So a busy key moves at the broker's one-at-a-time rate
	// instead of one event per claim → publish → mark cycle. A publisher
	// that keeps a key's order by itself (publishers.OrderKeeper) gets a
	// key's events in one pipelined call. Default 1000 (BatchSize, when
	// smaller); 1 takes heads only.
	PerKey int
	// KeyedFailure is what a failing keyed event does to its key in
	// ordered mode. BlockKey (the default) retries it for ever, with
	// RetryBackoff, holding its key's later events back until it succeeds
	// or is dead-lettered by hand (`outbox dead-letter`); even a permanent
	// rejection blocks, since skipping it would break the key's order.
	// DeadLetterKey makes it dead after MaxAttempts (at once when the
	// broker rejects it permanently) and lets the key go on. Other keys
	// flow either way.
	KeyedFailure FailurePolicy
	// RetryBackoff spaces an event's retries: Min, doubling, up to Max, with
	// jitter. Default 1s to 5m, jitter 0.2.
	RetryBackoff outbox.Backoff
	// OutageBackoff spaces the relay's probes of a broker that is down.
	// Default 250ms to 30s, jitter 0.2.
	OutageBackoff outbox.Backoff
	// Retention keeps published events for this long (marked published,
	// then purged in small batches). Zero, the default, deletes each event
	// as soon as the broker has acknowledged it.
	Retention time.Duration
	// PurgeInterval is how often published events past Retention are
	// purged. Default 1m. Unused when Retention is zero.
	PurgeInterval time.Duration
	// DisableListen stops the relay from using the store's wake-ups
	// (LISTEN/NOTIFY); it then relies on PollInterval and Wake. Default false.
	DisableListen bool
	// ShutdownTimeout is how long Run waits for in-flight batches when its
	// context is cancelled. Default 30s.
	ShutdownTimeout time.Duration
	// InProcess, when set, handles events of chosen topics in this process
	// instead of publishing them (see Handlers). Default nil.
	InProcess InProcess
	// Clock stamps every time the relay writes. Default outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the relay's logs. Default: discarded.
	Logger *slog.Logger
	// Hooks observe the relay; all optional.
	Hooks Hooks
}

// FailurePolicy is what a failing keyed event does to its key.
type FailurePolicy int

const (
	// BlockKey holds the key until the event succeeds or is dead-lettered
	// by hand.
	BlockKey FailurePolicy = iota
	// DeadLetterKey dead-letters the event after MaxAttempts and goes on
	// with the key's next event.
	DeadLetterKey
)

// String returns "block" or "dead-letter".
func (p FailurePolicy) String() string {
	if p == DeadLetterKey {
		return "dead-letter"
	}
	return "block"
}

// ParseFailurePolicy parses "block" or "dead-letter".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "block":
		return BlockKey, nil
	case "dead-letter":
		return DeadLetterKey, nil
	}
	return 0, fmt.Errorf("failure policy %q: want block or dead-letter", s)
}

// Hooks observe the relay. They run on the relay's goroutines: keep them
// quick.
type Hooks struct {
	// AfterPublish is called when a batch's publish has returned, before
	// the batch is completed (marked) in the store, with one result per
	// message. Metrics go here; so do tests that kill a relay between
	// publish and mark.
	AfterPublish func(msgs []outbox.Message, errs []error)
	// AfterComplete is called when a batch's outcome is stored.
	AfterComplete func(BatchResult)
	// AfterClaim is called after every claim, empty and failed ones
	// included.
	AfterClaim func(ClaimResult)
	// AfterCompleteFailed is called when storing a batch's outcome
	// failed (err): the batch's events stay as they were, claimed until
	// the claim times out, and are claimed and sent again then. res
	// counts the outcome that was lost: res.Published events the broker
	// had acknowledged will be published again (the duplicates of
	// at-least-once delivery, which the inbox drops).
	AfterCompleteFailed func(res BatchResult, err error)
}

// ClaimResult says how one claim went.
type ClaimResult struct {
	// Claimed counts the events claimed; zero for an empty or failed
	// claim.
	Claimed int
	// Elapsed is the claim's duration (wall clock).
	Elapsed time.Duration
	// Err is the claim's error, nil when it succeeded.
	Err error
}

// BatchResult counts what happened to one batch.
type BatchResult struct {
	Claimed, Published, Retried, Dead int
	// Unavailable and Refused were left pending, uncharged: the broker
	// was unavailable, or refused the relay's configuration.
	Unavailable, Refused int
	// Deferred were claimed but not sent, left pending and uncharged: an
	// earlier event of their key in the batch failed, the broker went
	// away, or the batch's publish time ran short (see Config.PerKey).
	Deferred int
	// Elapsed is the time from claim to completion (wall clock).
	Elapsed time.Duration
	// ClaimElapsed, PublishElapsed and CompleteElapsed are Elapsed's
	// parts (wall clock): the claim; the publish, from the first send to
	// the last acknowledgement; and the completion in the store (or its
	// failed attempt).
	ClaimElapsed, PublishElapsed, CompleteElapsed time.Duration
}

// Defaults for Config.
const (
	DefaultBatchSize       = 1000
	DefaultWorkers         = 2
	DefaultPerKey          = 1000
	DefaultPollInterval    = time.Second
	DefaultPublishTimeout  = 10 * time.Second
	DefaultStoreTimeout    = 30 * time.Second
	DefaultMaxAttempts     = 10
	DefaultPurgeInterval   = time.Minute
	DefaultShutdownTimeout = 30 * time.Second
)

// Default backoffs for Config.
var (
	DefaultRetryBackoff  = outbox.Backoff{Min: time.Second, Max: 5 * time.Minute, Jitter: 0.2}
	DefaultOutageBackoff = outbox.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second, Jitter: 0.2}
)

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if out.BatchSize == 0 {
		out.BatchSize = DefaultBatchSize
	}
	if out.Workers == 0 {
		out.Workers = DefaultWorkers
	}
	if out.PerKey == 0 {
		out.PerKey = min(DefaultPerKey, out.BatchSize)
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	def(&out.PollInterval, DefaultPollInterval)
	def(&out.PublishTimeout, DefaultPublishTimeout)
	def(&out.StoreTimeout, DefaultStoreTimeout)
	def(&out.PurgeInterval, DefaultPurgeInterval)
	def(&out.ShutdownTimeout, DefaultShutdownTimeout)
	if out.RetryBackoff == (outbox.Backoff{}) {
		out.RetryBackoff = DefaultRetryBackoff
	}
	if out.OutageBackoff == (outbox.Backoff{}) {
		out.OutageBackoff = DefaultOutageBackoff
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if out.KeyedFailure != BlockKey && out.KeyedFailure != DeadLetterKey {
		errs = append(errs, fmt.Errorf("KeyedFailure %d: want BlockKey or DeadLetterKey", out.KeyedFailure))
	}
	if out.BatchSize < 0 || out.Workers < 0 || out.MaxAttempts < 0 || out.PerKey < 0 {
		errs = append(errs, errors.New("BatchSize, Workers, MaxAttempts and PerKey must be positive"))
	}
	if out.PollInterval < 0 || out.PublishTimeout < 0 || out.StoreTimeout < 0 || out.Retention < 0 || out.PurgeInterval < 0 || out.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	for _, b := range []outbox.Backoff{out.RetryBackoff, out.OutageBackoff} {
		if b.Min <= 0 || b.Max < b.Min || b.Jitter < 0 || b.Jitter > 1 {
			errs = append(errs, fmt.Errorf("backoff %+v: want 0 < Min ≤ Max and 0 ≤ Jitter ≤ 1", b))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("relay: config: %w", err)
	}
	return out, nil
}
