package rabbitmq

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/subscribers"
)

// PublisherConfig configures a Publisher. Nil, or the zero value,
// publishes to the default exchange of the RabbitMQ at
// amqp://guest:guest@127.0.0.1:5672/, with the topic as the routing key.
// Zero means the default for every field; a negative number or duration
// is an error.
type PublisherConfig struct {
	// URL is the broker's AMQP URL. Default DefaultURL.
	URL string
	// AMQP is the amqp091 configuration to dial with (TLS, heartbeat,
	// properties, …). Its Dial is replaced by one with DialTimeout when
	// nil. Default: amqp091's defaults.
	AMQP amqp.Config
	// Name is the connection name the management UI shows. Default
	// DefaultName ("outbox").
	Name string

	// Exchange is the exchange every message is published to. Default ""
	// (the default exchange).
	Exchange string
	// RoutingKey maps a topic to a routing key. Default nil: the topic.
	RoutingKey func(topic string) string

	// MaxMessageSize is the largest payload the publisher sends; a larger
	// one fails as permanent without being sent. Default
	// DefaultMaxMessageSize (128 MiB, the server's default
	// max_message_size).
	MaxMessageSize int
	// ConfirmTimeout is how long a Publish call waits for confirms,
	// whatever the context says; past it the unconfirmed messages fail as
	// unavailable. Default DefaultConfirmTimeout (30 s).
	ConfirmTimeout time.Duration
	// DialTimeout bounds each connection attempt, the AMQP handshake
	// included. Default DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// Logger receives connection events. Default nil: discarded.
	Logger *slog.Logger
}

// SubscriberConfig configures a Subscriber. Queue and DeadLetterRoutingKey
// are required; every other field has a default, which zero stands for. A
// negative number or duration is an error.
type SubscriberConfig struct {
	// Options are the knobs every subscriber has: MaxDeliveries, Backoff
	// (held in the subscriber: see the package documentation),
	// Concurrency (also the channel's prefetch, at most 65535),
	// ShutdownTimeout, Logger and Hooks.
	subscribers.Options

	// URL is the broker's AMQP URL. Default DefaultURL.
	URL string
	// AMQP tunes the connection (TLS, heartbeat, properties). Its Dial is
	// replaced by one with DialTimeout when nil. Default: amqp091's
	// defaults.
	AMQP amqp.Config
	// DialTimeout bounds each dial, the AMQP handshake included. Default
	// DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// Queue is the queue to consume. It must exist (Setup may declare it).
	// Required.
	Queue string
	// Setup, when set, runs on a channel of every new connection before
	// consuming: declare the queue, the exchanges and bindings here.
	// Default nil.
	Setup func(ch *amqp.Channel) error
	// RoutingKeyPrefix is stripped from a message's routing key to give
	// inbox.Message.Topic. Default "": the topic is the routing key (the
	// publisher's default).
	RoutingKeyPrefix string

	// DeadLetterExchange and DeadLetterRoutingKey receive messages that
	// exhausted MaxDeliveries or failed permanently, with the error in the
	// Outbox-Error header. The exchange "" (the default) is the default
	// exchange, where the routing key names a queue. DeadLetterRoutingKey
	// is required, and the pair must route to a queue other than Queue.
	DeadLetterExchange   string
	DeadLetterRoutingKey string

	// ReconnectDelay is the first wait before dialing again after the
	// connection dropped; it doubles up to 30 s. Default
	// DefaultReconnectDelay (500 ms).
	ReconnectDelay time.Duration
	// ConfirmTimeout bounds the wait for the broker's confirmation of a
	// republish or a dead letter. Default DefaultSubscriberConfirmTimeout
	// (10 s).
	ConfirmTimeout time.Duration
}

// Defaults of PublisherConfig and SubscriberConfig (the subscriber's
// Options have theirs in package subscribers).
const (
	// DefaultURL is the URL of both: the local broker, as guest.
	DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"
	// DefaultDialTimeout is the DialTimeout of both.
	DefaultDialTimeout = 5 * time.Second

	// DefaultName is PublisherConfig.Name's.
	DefaultName = "outbox"
	// DefaultMaxMessageSize is PublisherConfig.MaxMessageSize's.
	DefaultMaxMessageSize = 128 << 20
	// DefaultConfirmTimeout is PublisherConfig.ConfirmTimeout's.
	DefaultConfirmTimeout = 30 * time.Second

	// DefaultReconnectDelay is SubscriberConfig.ReconnectDelay's.
	DefaultReconnectDelay = 500 * time.Millisecond
	// DefaultSubscriberConfirmTimeout is SubscriberConfig.ConfirmTimeout's.
	DefaultSubscriberConfirmTimeout = 10 * time.Second

	maxReconnectDelay = 30 * time.Second
	// maxPrefetch is the largest prefetch count (a short in basic.qos).
	maxPrefetch = 65535
)

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	var out PublisherConfig
	if c != nil {
		out = *c
	}
	if out.URL == "" {
		out.URL = DefaultURL
	}
	if out.Name == "" {
		out.Name = DefaultName
	}
	if out.MaxMessageSize == 0 {
		out.MaxMessageSize = DefaultMaxMessageSize
	}
	if out.ConfirmTimeout == 0 {
		out.ConfirmTimeout = DefaultConfirmTimeout
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = DefaultDialTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

func (c *PublisherConfig) validate() error {
	var errs []error
	if err := checkURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("MaxMessageSize is %d, must not be negative", c.MaxMessageSize))
	}
	errs = append(errs, nonNegative("ConfirmTimeout", c.ConfirmTimeout), nonNegative("DialTimeout", c.DialTimeout))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rabbitmq publisher config: %w", err)
	}
	return nil
}

// amqpConfig is the amqp091 configuration to dial with.
func (c *PublisherConfig) amqpConfig() amqp.Config {
	ac := dialConfig(c.AMQP, c.DialTimeout)
	props := amqp.Table{}
	for k, v := range ac.Properties {
		props[k] = v
	}
	if _, ok := props["connection_name"]; !ok {
		props["connection_name"] = c.Name
	}
	ac.Properties = props
	return ac
}

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default, the Options' included.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	var out SubscriberConfig
	if c != nil {
		out = *c
	}
	out.Options = out.Options.WithDefaults()
	if out.URL == "" {
		out.URL = DefaultURL
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = DefaultDialTimeout
	}
	if out.ReconnectDelay == 0 {
		out.ReconnectDelay = DefaultReconnectDelay
	}
	if out.ConfirmTimeout == 0 {
		out.ConfirmTimeout = DefaultSubscriberConfirmTimeout
	}
	return out
}

func (c *SubscriberConfig) validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Concurrency > maxPrefetch {
		errs = append(errs, fmt.Errorf("Concurrency %d: at most %d (it is the channel's prefetch)", c.Concurrency, maxPrefetch))
	}
	if err := checkURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if c.Queue == "" {
		errs = append(errs, errors.New("Queue is required"))
	}
	if c.DeadLetterRoutingKey == "" {
		errs = append(errs, errors.New("DeadLetterRoutingKey is required"))
	} else if c.DeadLetterExchange == "" && c.DeadLetterRoutingKey == c.Queue {
		errs = append(errs, fmt.Errorf("the dead-letter destination is the queue %q itself", c.Queue))
	}
	errs = append(errs, nonNegative("DialTimeout", c.DialTimeout), nonNegative("ReconnectDelay", c.ReconnectDelay),
		nonNegative("ConfirmTimeout", c.ConfirmTimeout))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rabbitmq subscriber config: %w", err)
	}
	return nil
}

// checkURL checks an AMQP URL's form, its password hidden in the error.
func checkURL(rawURL string) error {
	if _, err := amqp.ParseURI(rawURL); err != nil {
		return fmt.Errorf("URL %s: %s", redact.URL(rawURL), redact.Text(err.Error()))
	}
	return nil
}

// nonNegative is the error of a negative duration field, nil otherwise.
func nonNegative(field string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s is %v, must not be negative", field, d)
	}
	return nil
}

// dialConfig is ac with a dialer bounded by timeout when it has none.
func dialConfig(ac amqp.Config, timeout time.Duration) amqp.Config {
	if ac.Dial == nil {
		ac.Dial = amqp.DefaultDial(timeout)
	}
	return ac
}
