package subscribers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// Subscriber is what every broker's subscriber does.
type Subscriber interface {
	// Start connects, checks the broker's side (the source exists, the
	// dead-letter destination is reachable, the credentials hold) and
	// begins consuming. A refused credential or a missing target is an
	// error here, not a retry.
	Start(ctx context.Context) error
	// Stop stops taking messages and waits for in-flight handlers to
	// finish; when ctx ends first, it cancels them and their messages are
	// released to the broker uncounted, never dead-lettered.
	Stop(ctx context.Context) error
	// Run is Start, then Stop (with Options.ShutdownTimeout) when ctx
	// ends.
	Run(ctx context.Context) error
}

// Options are the knobs every subscriber has. Each broker's
// SubscriberConfig embeds them. Zero means the default, for every field.
type Options struct {
	// MaxDeliveries is how many deliveries a message gets before it is
	// dead-lettered. Default DefaultMaxDeliveries (5).
	MaxDeliveries int
	// Backoff spaces the redeliveries after a handler error: Min after the
	// first delivery, doubling, up to Max, with jitter. Default
	// DefaultBackoff (1 s to 5 min, jitter 0.2).
	Backoff outbox.Backoff
	// Concurrency is how many messages are handled at once. Default 1,
	// which keeps the source's order. (Kafka handles one partition at a
	// time, whatever this says.)
	Concurrency int
	// ShutdownTimeout is how long Run lets in-flight handlers finish when
	// its context ends. Default DefaultShutdownTimeout (30 s).
	ShutdownTimeout time.Duration
	// Logger receives the subscriber's logs. Default: discarded.
	Logger *slog.Logger
	// Hooks observe the subscriber; all optional.
	Hooks Hooks
}

// Defaults for Options.
const (
	DefaultMaxDeliveries   = 5
	DefaultConcurrency     = 1
	DefaultShutdownTimeout = 30 * time.Second
)

// DefaultBackoff is Options.Backoff's default.
var DefaultBackoff = outbox.Backoff{Min: time.Second, Max: 5 * time.Minute, Jitter: 0.2}

// Validate reports the fields no subscriber can run with: negative
// numbers and durations, and an impossible Backoff. It does not apply the
// defaults.
func (o *Options) Validate() error {
	var errs []error
	if o.MaxDeliveries < 0 {
		errs = append(errs, fmt.Errorf("MaxDeliveries %d: must not be negative", o.MaxDeliveries))
	}
	if o.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("Concurrency %d: must not be negative", o.Concurrency))
	}
	if o.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("ShutdownTimeout %v: must not be negative", o.ShutdownTimeout))
	}
	if err := o.Backoff.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Backoff: %w", err))
	}
	return errors.Join(errs...)
}

// WithDefaults returns a copy of o with every zero field set to its
// default.
func (o Options) WithDefaults() Options {
	if o.MaxDeliveries == 0 {
		o.MaxDeliveries = DefaultMaxDeliveries
	}
	if o.Backoff == (outbox.Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Hooks observe a subscriber. They run on its goroutines: keep them quick.
type Hooks struct {
	// AfterCommit is called when a message's transaction has committed (or
	// the message proved a duplicate), before it is acknowledged. Tests
	// that kill a consumer between commit and ack block here.
	AfterCommit func(msg inbox.Message, outcome inbox.Outcome)
	// AfterSettle is called once a delivery is settled. Metrics go here.
	AfterSettle func(Settlement)
}

// Settlement is how one delivery ended.
type Settlement struct {
	// Message is the decoded message (its ID may be zero when the message
	// could not be decoded).
	Message inbox.Message
	// Source is where the message came from, in the broker's words: the
	// subject, topic, routing key or stream.
	Source string
	// Delivery is the message's delivery count, this one included.
	Delivery int
	// Outcome is the inbox's outcome when the handler's transaction
	// committed or the message was a duplicate; zero otherwise.
	Outcome inbox.Outcome
	// Err is the handler's (or the inbox's, or the decoder's) error; nil
	// when acknowledged.
	Err error
	// Action says what was done with the message.
	Action Action
	// Delay is the redelivery delay, for ActionRetry.
	Delay time.Duration
}

// Action is how a delivery was settled.
type Action int

const (
	// ActionAck: handled, or a duplicate; acknowledged (Kafka: its offset
	// committed).
	ActionAck Action = iota + 1
	// ActionRetry: failed; handed back for redelivery after Delay.
	ActionRetry
	// ActionDeadLetter: sent to the dead-letter destination, then
	// acknowledged.
	ActionDeadLetter
	// ActionRelease: a Stop cut the handler short; handed back to the
	// broker without counting against the message.
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
