package rabbitmq

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/backoff"
	"github.com/outboxgo/outbox/internal/redact"
)

// Config configures a Subscriber. Queue and DeadLetterRoutingKey are
// required; every other field has a default.
type Config struct {
	// URL is the broker's AMQP URL. Default amqp://guest:guest@127.0.0.1:5672/.
	URL string
	// AMQP tunes the connection (TLS, heartbeat, properties). Default: the
	// library's, with a DialTimeout dialer.
	AMQP amqp.Config
	// DialTimeout bounds each dial. Default 5s.
	DialTimeout time.Duration

	// Queue is the queue to consume. It must exist (Setup may declare it).
	// Required.
	Queue string
	// Setup, when set, runs on a channel of every new connection before
	// consuming: declare the queue, the exchanges and bindings here.
	Setup func(ch *amqp.Channel) error
	// RoutingKeyPrefix is stripped from a message's routing key to give
	// inbox.Message.Topic. Default "": the topic is the routing key (the
	// publisher's default).
	RoutingKeyPrefix string

	// DeadLetterExchange and DeadLetterRoutingKey receive messages that
	// exhausted MaxDeliveries or failed permanently, with the error in the
	// Outbox-Error header. The exchange "" is the default exchange (the
	// routing key names a queue). DeadLetterRoutingKey is required, and
	// the pair must route to a queue other than Queue.
	DeadLetterExchange   string
	DeadLetterRoutingKey string
	// MaxDeliveries is how many deliveries a message gets before it is
	// dead-lettered. Default 5.
	MaxDeliveries int
	// Backoff spaces the retries after a handler error: Min after the
	// first delivery, doubling, up to Max, with jitter. The delay is held
	// in the consumer (see the package doc). Default 1s to 1m, jitter 0.2.
	Backoff Backoff
	// Concurrency is how many messages are handled at once, and the
	// channel's prefetch. Default 1.
	Concurrency int
	// ReconnectDelay is the first wait before dialing again after the
	// connection dropped; it doubles up to 30s. Default 500ms.
	ReconnectDelay time.Duration
	// ConfirmTimeout bounds the wait for the broker's confirmation of a
	// republish or a dead letter. Default 10s.
	ConfirmTimeout time.Duration
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
	// it proved a duplicate), before it is acknowledged.
	AfterCommit func(msg inbox.Message, outcome inbox.Outcome)
	// AfterSettle is called once a delivery is settled.
	AfterSettle func(Settlement)
	// Connected is called after each successful (re)connection.
	Connected func()
}

// Settlement is how one delivery ended.
type Settlement struct {
	// Message is the decoded message (its ID may be zero when the message
	// could not be decoded).
	Message inbox.Message
	// RoutingKey is the routing key the message was published with;
	// Delivery its delivery count.
	RoutingKey string
	Delivery   int
	// Outcome is the inbox's outcome when the handler's transaction
	// committed or the message was a duplicate; zero otherwise.
	Outcome inbox.Outcome
	// Err is the handler's (or the inbox's) error; nil when acknowledged.
	Err error
	// Action says what was done with the message.
	Action Action
	// RetryDelay is the delay waited before the retry, for ActionRetry.
	RetryDelay time.Duration
}

// Action is how a delivery was settled.
type Action int

const (
	// ActionAck: handled or duplicate; acknowledged.
	ActionAck Action = iota + 1
	// ActionRetry: failed; after RetryDelay republished to the queue with
	// its delivery count incremented, and the original acknowledged.
	ActionRetry
	// ActionDeadLetter: published to the dead-letter destination,
	// acknowledged.
	ActionDeadLetter
	// ActionRequeue: not finished (Stop, a lost connection, a failed
	// republish); handed back with Nack(requeue=true).
	ActionRequeue
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionRetry:
		return "retry"
	case ActionDeadLetter:
		return "dead-letter"
	case ActionRequeue:
		return "requeue"
	}
	return "none"
}

// Defaults for Config.
const (
	DefaultURL             = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultDialTimeout     = 5 * time.Second
	DefaultMaxDeliveries   = 5
	DefaultConcurrency     = 1
	DefaultReconnectDelay  = 500 * time.Millisecond
	DefaultConfirmTimeout  = 10 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	maxReconnectDelay      = 30 * time.Second
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
	if c.URL == "" {
		c.URL = DefaultURL
	}
	def(&c.DialTimeout, DefaultDialTimeout)
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.Backoff == (Backoff{}) {
		c.Backoff = DefaultBackoff
	}
	if c.Backoff.Max == 0 {
		c.Backoff.Max = max(c.Backoff.Min, DefaultBackoff.Max)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	def(&c.ReconnectDelay, DefaultReconnectDelay)
	def(&c.ConfirmTimeout, DefaultConfirmTimeout)
	def(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if _, err := amqp.ParseURI(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("URL %s: %s", redact.URL(c.URL), redact.Text(err.Error())))
	}
	if c.Queue == "" {
		errs = append(errs, errors.New("Queue is required"))
	}
	if c.DeadLetterRoutingKey == "" {
		errs = append(errs, errors.New("DeadLetterRoutingKey is required"))
	} else if c.DeadLetterExchange == "" && c.DeadLetterRoutingKey == c.Queue {
		errs = append(errs, fmt.Errorf("the dead-letter destination is the queue %q itself", c.Queue))
	}
	if c.MaxDeliveries < 1 {
		errs = append(errs, fmt.Errorf("MaxDeliveries is %d, must be at least 1", c.MaxDeliveries))
	}
	if c.Backoff.Min < 0 || c.Backoff.Max < c.Backoff.Min || c.Backoff.Jitter < 0 || c.Backoff.Jitter > 1 {
		errs = append(errs, fmt.Errorf("Backoff %+v: want 0 ≤ Min ≤ Max and Jitter in [0, 1]", c.Backoff))
	}
	if c.Concurrency < 1 || c.Concurrency > 65535 {
		errs = append(errs, fmt.Errorf("Concurrency is %d, must be 1 to 65535", c.Concurrency))
	}
	if c.DialTimeout < 0 || c.ReconnectDelay < 0 || c.ConfirmTimeout < 0 || c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rabbitmq subscriber config: %w", err)
	}
	return nil
}

func (c Config) amqpConfig() amqp.Config {
	ac := c.AMQP
	if ac.Dial == nil {
		ac.Dial = amqp.DefaultDial(c.DialTimeout)
	}
	return ac
}

// delay is the backoff after the delivery-th failure: Min·2^(delivery-1),
// capped at Max, spread by ±Jitter.
func (b Backoff) delay(delivery int) time.Duration {
	return backoff.Delay(b.Min, b.Max, b.Jitter, delivery)
}
