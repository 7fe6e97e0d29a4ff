package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox/inbox"
)

// Config configures a Subscriber. Stream, Durable and DeadLetterSubject are
// required; every other field has a default.
type Config struct {
	// Stream is the JetStream stream to consume. Required.
	Stream string
	// Durable names the durable pull consumer, created (or updated) by
	// Start. Instances with the same Durable share the work. Required.
	Durable string
	// FilterSubjects limits the consumer to these subjects (wildcards
	// allowed; more than one needs nats-server 2.10 or later). Default:
	// every subject of the stream.
	FilterSubjects []string
	// SubjectPrefix is stripped, with its '.', from a message's subject to
	// give inbox.Message.Topic: the publisher's SubjectPrefix. Default "":
	// the topic is the subject.
	SubjectPrefix string

	// DeadLetterSubject receives messages that exhausted MaxDeliver or
	// failed permanently, with the error in the Outbox-Error header. A
	// stream must capture it (Start checks), and it must not be one this
	// consumer reads. Required.
	DeadLetterSubject string
	// MaxDeliver is how many deliveries a message gets before it is
	// dead-lettered. Default 5.
	MaxDeliver int
	// Backoff spaces the redeliveries after a handler error (NakWithDelay):
	// Min after the first delivery, doubling, up to Max, with jitter.
	// Default 1s to 5m, jitter 0.2.
	Backoff Backoff
	// AckWait is how long a delivery may go unacknowledged before
	// JetStream redelivers it (the consumer crashed or stalled). While a
	// handler runs the subscriber tells the server it is in progress every
	// AckWait/2, so a slow handler is not redelivered. Default 30s.
	AckWait time.Duration
	// Concurrency is how many messages are handled at once. Default 1,
	// which keeps the stream's order.
	Concurrency int
	// MaxAckPending caps the messages delivered and not yet acknowledged
	// across all instances of the consumer. Default 1000.
	MaxAckPending int
	// AckTimeout bounds the wait for the server's confirmation of an ack.
	// Default 5s.
	AckTimeout time.Duration
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
	// AfterCommit is called when a message's transaction has committed (or
	// the message proved a duplicate), before it is acknowledged. Tests
	// that kill a consumer between commit and ack block here.
	AfterCommit func(msg inbox.Message, outcome inbox.Outcome)
	// AfterSettle is called once a delivery is settled: acknowledged,
	// handed back for redelivery, or dead-lettered. Metrics go here.
	AfterSettle func(Settlement)
}

// Settlement is how one delivery ended.
type Settlement struct {
	// Message is the decoded message (its ID may be zero when the message
	// could not be decoded).
	Message inbox.Message
	// Subject is the message's subject; Delivery its delivery count.
	Subject  string
	Delivery int
	// Outcome is the inbox's outcome when the handler's transaction
	// committed or the message was a duplicate; zero otherwise.
	Outcome inbox.Outcome
	// Err is the handler's (or the inbox's) error; nil when acknowledged.
	Err error
	// Action says what was done with the message.
	Action Action
	// NakDelay is the redelivery delay, for ActionNak.
	NakDelay time.Duration
}

// Action is how a delivery was settled.
type Action int

const (
	// ActionAck: handled or duplicate; acknowledged.
	ActionAck Action = iota + 1
	// ActionNak: failed; handed back for redelivery (after NakDelay).
	ActionNak
	// ActionDeadLetter: published to the dead-letter subject, acknowledged.
	ActionDeadLetter
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionNak:
		return "nak"
	case ActionDeadLetter:
		return "dead-letter"
	}
	return "none"
}

// Defaults for Config.
const (
	DefaultMaxDeliver      = 5
	DefaultAckWait         = 30 * time.Second
	DefaultConcurrency     = 1
	DefaultMaxAckPending   = 1000
	DefaultAckTimeout      = 5 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// DefaultBackoff is Config.Backoff's default.
var DefaultBackoff = Backoff{Min: time.Second, Max: 5 * time.Minute, Jitter: 0.2}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = max(c.Backoff.Min, DefaultBackoff.Max)
	}
	def(&c.AckWait, DefaultAckWait)
	def(&c.AckTimeout, DefaultAckTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Stream == "" {
		errs = append(errs, errors.New("Stream is required"))
	}
	if c.Durable == "" {
		errs = append(errs, errors.New("Durable is required"))
	}
	if c.DeadLetterSubject == "" {
		errs = append(errs, errors.New("DeadLetterSubject is required"))
	} else if err := checkSubject(c.DeadLetterSubject, false); err != nil {
		errs = append(errs, fmt.Errorf("DeadLetterSubject: %w", err))
	}
	for _, f := range c.FilterSubjects {
		if err := checkSubject(f, true); err != nil {
			errs = append(errs, fmt.Errorf("FilterSubjects: %w", err))
		}
	}
	if c.MaxDeliver < 1 {
		errs = append(errs, fmt.Errorf("MaxDeliver is %d, must be at least 1", c.MaxDeliver))
	}
	if c.Backoff.Min < 0 || c.Backoff.Max < c.Backoff.Min || c.Backoff.Jitter < 0 || c.Backoff.Jitter > 1 {
		errs = append(errs, fmt.Errorf("Backoff %+v: want 0 ≤ Min ≤ Max and Jitter in [0, 1]", c.Backoff))
	}
	if c.AckWait < time.Millisecond {
		errs = append(errs, fmt.Errorf("AckWait is %v, must be at least 1ms", c.AckWait))
	}
	if c.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("Concurrency is %d, must be at least 1", c.Concurrency))
	}
	if c.MaxAckPending < 1 {
		errs = append(errs, fmt.Errorf("MaxAckPending is %d, must be at least 1", c.MaxAckPending))
	}
	if c.AckTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("AckTimeout and ShutdownTimeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nats subscriber config: %w", err)
	}
	return nil
}
