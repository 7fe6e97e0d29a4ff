package rabbitmq

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/internal/redact"
)

// Config configures a Publisher. The zero value publishes to the default
// exchange of the RabbitMQ at amqp://guest:guest@127.0.0.1:5672/, with the
// topic as the routing key.
type Config struct {
	// URL is the broker's AMQP URL. Default DefaultURL.
	URL string
	// AMQP is the amqp091 configuration to dial with (TLS, heartbeat,
	// properties, …). Its Dial is replaced by one with DialTimeout when
	// nil. Default: amqp091's defaults.
	AMQP amqp.Config
	// Name is the connection name the management UI shows. Default
	// "outbox".
	Name string

	// Exchange is the exchange every message is published to. Default ""
	// (the default exchange).
	Exchange string
	// RoutingKey maps a topic to a routing key. Default nil: the topic.
	RoutingKey func(topic string) string

	// MaxMessageSize is the largest payload the publisher sends; a larger
	// one fails as permanent without being sent. Default 128 MiB (the
	// server's default max_message_size).
	MaxMessageSize int
	// ConfirmTimeout is how long a Publish call waits for confirms,
	// whatever the context says; past it the unconfirmed messages fail as
	// unavailable. Default 30s.
	ConfirmTimeout time.Duration
	// DialTimeout bounds each connection attempt. Default 5s.
	DialTimeout time.Duration

	// Logger receives connection events. Default: a logger that discards
	// everything.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultURL            = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultName           = "outbox"
	DefaultMaxMessageSize = 128 << 20
	DefaultConfirmTimeout = 30 * time.Second
	DefaultDialTimeout    = 5 * time.Second
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = DefaultConfirmTimeout
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if _, err := amqp.ParseURI(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("URL %s: %s", redact.URL(c.URL), redact.Text(err.Error())))
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("MaxMessageSize is %d, must not be negative", c.MaxMessageSize))
	}
	if c.ConfirmTimeout < 0 {
		errs = append(errs, fmt.Errorf("ConfirmTimeout is %v, must not be negative", c.ConfirmTimeout))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout is %v, must not be negative", c.DialTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rabbitmq publisher config: %w", err)
	}
	return nil
}

// amqpConfig is the amqp091 configuration to dial with.
func (c Config) amqpConfig() amqp.Config {
	ac := c.AMQP
	if ac.Dial == nil {
		ac.Dial = amqp.DefaultDial(c.DialTimeout)
	}
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
