package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/backoff"
)

// Config configures a Subscriber. Topics, Group and DeadLetterTopic are
// required; every other field has a default.
type Config struct {
	// Brokers are the seed brokers. Default 127.0.0.1:9092.
	Brokers []string
	// ClientID names the client to the brokers. Default "outbox".
	ClientID string
	// Options are more client options (TLS, SASL, session timeout…),
	// applied after the subscriber's own. A kgo.WithLogger here replaces
	// the subscriber's logger, through which Start notices the brokers
	// refusing the SASL credentials.
	Options []kgo.Opt

	// Topics are the Kafka topics to consume. Required.
	Topics []string
	// TopicPrefix is stripped from a record's topic to give
	// inbox.Message.Topic: the publisher's TopicPrefix. Default "".
	TopicPrefix string
	// Group is the consumer group. Instances with the same Group share the
	// partitions. A new group starts at the earliest offset. Required.
	Group string

	// DeadLetterTopic receives records that exhausted MaxDeliveries or
	// failed permanently, with the error in the Outbox-Error header. It
	// must exist (or the brokers create topics on use) and must not be one
	// of Topics. Required.
	DeadLetterTopic string
	// MaxDeliveries is how many times a record is handled before it is
	// dead-lettered. Default 5.
	MaxDeliveries int
	// Backoff spaces the retries after a handler error: Min after the
	// first delivery, doubling, up to Max, with jitter. The partition
	// waits meanwhile (see the package doc). Default 1s to 30s, jitter 0.2.
	Backoff Backoff
	// CommitTimeout bounds each offset commit and dead-letter produce.
	// Default 10s.
	CommitTimeout time.Duration
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
	// AfterCommit is called when a record's transaction has committed (or
	// it proved a duplicate), before its offset is committed.
	AfterCommit func(msg inbox.Message, outcome inbox.Outcome)
	// AfterSettle is called once a delivery is settled.
	AfterSettle func(Settlement)
}

// Settlement is how one delivery of a record ended.
type Settlement struct {
	// Message is the decoded message (its ID may be zero when the record
	// could not be decoded).
	Message inbox.Message
	// Topic, Partition and Offset locate the record; Delivery counts its
	// deliveries in this subscriber, 1 for the first.
	Topic     string
	Partition int32
	Offset    int64
	Delivery  int
	// Outcome is the inbox's outcome when the handler's transaction
	// committed or the record was a duplicate; zero otherwise.
	Outcome inbox.Outcome
	// Err is the handler's (or the inbox's) error; nil when committed.
	Err error
	// Action says what was done with the record.
	Action Action
	// RetryDelay is the wait before the retry, for ActionRetry.
	RetryDelay time.Duration
}

// Action is how a delivery was settled.
type Action int

const (
	// ActionCommit: handled or duplicate; its offset committed.
	ActionCommit Action = iota + 1
	// ActionRetry: failed; handled again, in place, after RetryDelay.
	ActionRetry
	// ActionDeadLetter: produced to the dead-letter topic, its offset
	// committed.
	ActionDeadLetter
	// ActionAbandon: not finished (a Stop); its offset not committed, so
	// the group's next owner of the partition reads it again.
	ActionAbandon
)

func (a Action) String() string {
	switch a {
	case ActionCommit:
		return "commit"
	case ActionRetry:
		return "retry"
	case ActionDeadLetter:
		return "dead-letter"
	case ActionAbandon:
		return "abandon"
	}
	return "none"
}

// Defaults for Config.
const (
	DefaultBroker          = "127.0.0.1:9092"
	DefaultClientID        = "outbox"
	DefaultMaxDeliveries   = 5
	DefaultCommitTimeout   = 10 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// DefaultBackoff is Config.Backoff's default.
var DefaultBackoff = Backoff{Min: time.Second, Max: 30 * time.Second, Jitter: 0.2}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{DefaultBroker}
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = max(c.Backoff.Min, DefaultBackoff.Max)
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = DefaultCommitTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if len(c.Topics) == 0 || slices.Contains(c.Topics, "") {
		errs = append(errs, errors.New("Topics is required, without empty names"))
	}
	if c.Group == "" {
		errs = append(errs, errors.New("Group is required"))
	}
	if c.DeadLetterTopic == "" {
		errs = append(errs, errors.New("DeadLetterTopic is required"))
	} else if slices.Contains(c.Topics, c.DeadLetterTopic) {
		errs = append(errs, fmt.Errorf("DeadLetterTopic %q is one of Topics", c.DeadLetterTopic))
	}
	if c.MaxDeliveries < 1 {
		errs = append(errs, fmt.Errorf("MaxDeliveries is %d, must be at least 1", c.MaxDeliveries))
	}
	if c.Backoff.Min < 0 || c.Backoff.Max < c.Backoff.Min || c.Backoff.Jitter < 0 || c.Backoff.Jitter > 1 {
		errs = append(errs, fmt.Errorf("Backoff %+v: want 0 ≤ Min ≤ Max and Jitter in [0, 1]", c.Backoff))
	}
	if c.CommitTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("CommitTimeout and ShutdownTimeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka subscriber config: %w", err)
	}
	return nil
}

// delay is the backoff after the delivery-th failure: Min·2^(delivery-1),
// capped at Max, spread by ±Jitter.
func (b Backoff) delay(delivery int) time.Duration {
	return backoff.Delay(b.Min, b.Max, b.Jitter, delivery)
}
