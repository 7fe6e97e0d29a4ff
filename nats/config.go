package nats

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Config configures a Publisher. The zero value connects to nats.DefaultURL
// and publishes each message on the subject named by its topic.
type Config struct {
	// URL is the server URL, or a comma-separated list of them. Default
	// nats.DefaultURL ("nats://127.0.0.1:4222"). Ignored when Conn is set.
	URL string
	// Conn is an existing connection to publish on. When set, New does not
	// connect and Close does not close it; the caller configures it (see
	// New for the options that make a relay recover from outages). The
	// publisher sets no handler on it, so a publish the server's
	// permissions refuse fails only after AckTimeout, as Unavailable.
	// Default nil: New connects to URL.
	Conn *nats.Conn
	// Name is the connection name the server shows. Default "outbox".
	Name string
	// Options are extra nats.go options (credentials, TLS, …), applied
	// after the publisher's own so they may override them. A
	// nats.ErrorHandler here replaces the publisher's, which fails a
	// publish the server's permissions refuse at once (without it, the
	// publish waits out AckTimeout). Default none.
	Options []nats.Option

	// SubjectPrefix, when set, puts every message on SubjectPrefix + "." +
	// topic. Default "": the subject is the topic.
	SubjectPrefix string
	// Subject maps a topic to a subject, overriding SubjectPrefix. Default
	// nil.
	Subject func(topic string) string

	// MaxPending is how many publishes may wait for their acknowledgement
	// at once across all Publish calls; a publish past it waits for a slot
	// until its context ends (or AckTimeout, without a deadline). Default
	// 4096.
	MaxPending int
	// AckTimeout is how long a publish waits for its acknowledgement before
	// it fails as unavailable, whatever the context says. It also bounds
	// how long an abandoned publish (its Publish call's context ended)
	// holds a MaxPending slot. Default 30s.
	AckTimeout time.Duration
	// ConnectTimeout bounds New's first connection attempt. Default 2s.
	ConnectTimeout time.Duration
	// ReconnectWait is the pause between reconnection attempts; the
	// publisher reconnects forever. Default 2s (nats.DefaultReconnectWait).
	ReconnectWait time.Duration

	// Logger receives connection events (disconnect at Warn, reconnect at
	// Info), the server's refusals (permission denied, credentials refused)
	// at Error, with the URL's secrets hidden. Default: a logger that
	// discards everything.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.URL == "" {
		c.URL = nats.DefaultURL
	}
	if c.Name == "" {
		c.Name = "outbox"
	}
	if c.MaxPending == 0 {
		c.MaxPending = 4096
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = 30 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 2 * time.Second
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = nats.DefaultReconnectWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxPending < 0 {
		errs = append(errs, fmt.Errorf("MaxPending is %d, must not be negative", c.MaxPending))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("AckTimeout is %v, must not be negative", c.AckTimeout))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("ConnectTimeout is %v, must not be negative", c.ConnectTimeout))
	}
	if c.ReconnectWait < 0 {
		errs = append(errs, fmt.Errorf("ReconnectWait is %v, must not be negative", c.ReconnectWait))
	}
	if c.SubjectPrefix != "" && c.Subject == nil {
		if err := checkSubject(c.SubjectPrefix + ".x"); err != nil {
			errs = append(errs, fmt.Errorf("SubjectPrefix %q: %w", c.SubjectPrefix, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nats publisher config: %w", err)
	}
	return nil
}
