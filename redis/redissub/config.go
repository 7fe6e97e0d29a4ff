package redis

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/backoff"
)

// Config configures a Subscriber. Streams, Group and DeadLetterStream are
// required; every other field has a default.
type Config struct {
	// Streams are the streams to consume (publishers/redis writes topic T to
	// StreamPrefix+T). Required.
	Streams []string
	// StreamPrefix is stripped from a stream's name to give
	// inbox.Message.Topic: the publisher's StreamPrefix. Default "": the
	// topic is the stream's name.
	StreamPrefix string
	// Group is the consumer group, created (with MKSTREAM, reading from the
	// start of the stream) by Start when missing. Instances with the same
	// Group share the work. Required.
	Group string
	// Consumer names this instance within the group. Default: a random
	// name. Give a stable name to have a restarted instance own its
	// predecessor's pending entries (they are reclaimed either way).
	Consumer string

	// DeadLetterStream receives entries that exhausted MaxDeliveries or
	// failed permanently: the original fields plus the FieldError and
	// FieldDead* fields. It must not be one of Streams. Required.
	DeadLetterStream string
	// MaxDeliveries is how many deliveries an entry gets before it is
	// dead-lettered. Default 5.
	MaxDeliveries int
	// Backoff spaces the retries after a handler error: Min after the
	// first delivery, doubling, up to Max, with jitter. Max may not exceed
	// ClaimIdle. Default 1s to 1m, jitter 0.2.
	Backoff Backoff
	// ClaimIdle is how long an entry must be idle (neither delivered nor
	// kept alive) before any instance of the group claims it with
	// XAUTOCLAIM: the time a crashed consumer's entries wait. While a
	// handler runs, its entry is kept alive every ClaimIdle/3. Default 1m.
	ClaimIdle time.Duration
	// PollInterval is how often the subscriber looks for entries to claim
	// (failed entries whose backoff has passed, entries of crashed
	// consumers); while a claim fills every free handler slot, it claims
	// again as soon as a slot is free. Default 1s.
	PollInterval time.Duration
	// Block is how long an XREADGROUP waits for new entries; Stop may wait
	// this long for the read to return. Default 1s.
	Block time.Duration
	// Concurrency is how many entries are handled at once. Default 1.
	Concurrency int
	// OpTimeout bounds each Redis command other than the blocking read.
	// Default 5s.
	OpTimeout time.Duration
	// ShutdownTimeout is how long Run lets in-flight handlers finish when
	// its context ends. Default 30s.
	ShutdownTimeout time.Duration

	// Logger receives the subscriber's logs. Default: discarded.
	Logger *slog.Logger
	// Hooks observe the subscriber; all optional.
	Hooks Hooks
}

// Backoff is an exponential backoff with jitter.
type Backoff struct {
	Min, Max time.Duration
	// Jitter spreads each delay uniformly over ±Jitter of it (0 to 1).
	Jitter float64
}

// Hooks observe a Subscriber. They run on its goroutines: keep them quick.
type Hooks struct {
	// AfterCommit is called when an entry's transaction has committed (or
	// it proved a duplicate), before XACK.
	AfterCommit func(msg inbox.Message, outcome inbox.Outcome)
	// AfterSettle is called once a delivery is settled.
	AfterSettle func(Settlement)
}

// Settlement is how one delivery ended.
type Settlement struct {
	// Message is the decoded message (its ID may be zero when the entry
	// could not be decoded).
	Message inbox.Message
	// Stream and EntryID locate the entry; Delivery is its delivery count.
	Stream, EntryID string
	Delivery        int
	// Outcome is the inbox's outcome when the handler's transaction
	// committed or the entry was a duplicate; zero otherwise.
	Outcome inbox.Outcome
	// Err is the handler's (or the inbox's) error; nil when acknowledged.
	Err error
	// Action says what was done with the entry.
	Action Action
	// RetryDelay is the delay before the retry, for ActionRetry.
	RetryDelay time.Duration
}

// Action is how a delivery was settled.
type Action int

const (
	// ActionAck: handled or duplicate; XACKed.
	ActionAck Action = iota + 1
	// ActionRetry: failed; left pending, to be claimed after RetryDelay.
	ActionRetry
	// ActionDeadLetter: added to the dead-letter stream, XACKed.
	ActionDeadLetter
	// ActionRelease: not finished (a hard Stop); left pending, claimable
	// at once.
	ActionRelease
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionRetry:
		return "retry"
	case ActionDeadLetter:
		return "dead-letter"
	case ActionRelease:
		return "release"
	}
	return "none"
}

// Defaults for Config.
const (
	DefaultMaxDeliveries   = 5
	DefaultClaimIdle       = time.Minute
	DefaultPollInterval    = time.Second
	DefaultBlock           = time.Second
	DefaultConcurrency     = 1
	DefaultOpTimeout       = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// DefaultBackoff is Config.Backoff's default.
var DefaultBackoff = Backoff{Min: time.Second, Max: time.Minute, Jitter: 0.2}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	def(&c.ClaimIdle, DefaultClaimIdle)
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = max(c.Backoff.Min, min(DefaultBackoff.Max, c.ClaimIdle))
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.Block, DefaultBlock)
	def(&c.OpTimeout, DefaultOpTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Consumer == "" {
		c.Consumer = fmt.Sprintf("outbox-%016x", rand.Uint64())
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if len(c.Streams) == 0 {
		errs = append(errs, errors.New("Streams is required"))
	}
	for _, s := range c.Streams {
		if s == "" {
			errs = append(errs, errors.New("Streams holds an empty name"))
		}
		if s == c.DeadLetterStream {
			errs = append(errs, fmt.Errorf("DeadLetterStream %q is one of Streams", s))
		}
	}
	if c.Group == "" {
		errs = append(errs, errors.New("Group is required"))
	}
	if c.DeadLetterStream == "" {
		errs = append(errs, errors.New("DeadLetterStream is required"))
	}
	if c.MaxDeliveries < 1 {
		errs = append(errs, fmt.Errorf("MaxDeliveries is %d, must be at least 1", c.MaxDeliveries))
	}
	if c.ClaimIdle < 3*time.Millisecond {
		errs = append(errs, fmt.Errorf("ClaimIdle is %v, must be at least 3ms", c.ClaimIdle))
	}
	if c.Backoff.Min < 0 || c.Backoff.Max < c.Backoff.Min || c.Backoff.Jitter < 0 || c.Backoff.Jitter > 1 {
		errs = append(errs, fmt.Errorf("Backoff %+v: want 0 ≤ Min ≤ Max and Jitter in [0, 1]", c.Backoff))
	}
	if c.Backoff.Max > c.ClaimIdle {
		errs = append(errs, fmt.Errorf("Backoff.Max %v exceeds ClaimIdle %v", c.Backoff.Max, c.ClaimIdle))
	}
	if c.PollInterval < time.Millisecond || c.Block < time.Millisecond {
		errs = append(errs, errors.New("PollInterval and Block must be at least 1ms"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("Concurrency is %d, must be at least 1", c.Concurrency))
	}
	if c.OpTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("OpTimeout and ShutdownTimeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redis subscriber config: %w", err)
	}
	return nil
}

// delay is the backoff after the delivery-th failure: Min·2^(delivery-1),
// capped at Max, spread by ±Jitter (and never above Max).
func (b Backoff) delay(delivery int) time.Duration {
	// Capped after the jitter too: Max must stay within ClaimIdle.
	return min(backoff.Delay(b.Min, b.Max, b.Jitter, delivery), b.Max)
}
