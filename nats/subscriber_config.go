package nats

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxgo/outbox/subscribers"
)

// SubscriberConfig configures a Subscriber. Stream, Durable and
// DeadLetterSubject are required; every other field has a default.
type SubscriberConfig struct {
	// Options are what every subscriber takes: MaxDeliveries (the
	// deliveries a message gets before it is dead-lettered, default 5),
	// Backoff (spacing the redeliveries after a handler error, by
	// NakWithDelay), Concurrency, ShutdownTimeout, Logger and Hooks. See
	// subscribers.Options for their defaults.
	subscribers.Options

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
	// give inbox.Message.Topic: the publisher's SubjectPrefix. Default
	// DefaultSubjectPrefix ("outbox"); NoSubjectPrefix makes the topic the
	// whole subject.
	SubjectPrefix string

	// DeadLetterSubject receives messages that exhausted MaxDeliveries or
	// failed permanently, with the error in the Outbox-Error header. A
	// stream must capture it (Start checks), and it must not be one this
	// consumer reads. Required.
	DeadLetterSubject string
	// AckWait is how long a delivery may go unacknowledged before
	// JetStream redelivers it (the consumer crashed or stalled). While a
	// handler runs the subscriber tells the server it is in progress every
	// AckWait/2, so a slow handler is not redelivered. At least 1ms.
	// Default DefaultAckWait (30s).
	AckWait time.Duration
	// MaxAckPending caps the messages delivered and not yet acknowledged
	// across all instances of the consumer. Default DefaultMaxAckPending
	// (1000).
	MaxAckPending int
	// AckTimeout bounds the wait for the server's confirmation of an ack
	// (and of a dead-letter publish). Default DefaultAckConfirmTimeout
	// (5s).
	AckTimeout time.Duration
}

// Defaults for SubscriberConfig (subscribers.Options has the others).
const (
	DefaultAckWait           = 30 * time.Second
	DefaultMaxAckPending     = 1000
	DefaultAckConfirmTimeout = 5 * time.Second
)

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default, Options included.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	var out SubscriberConfig
	if c != nil {
		out = *c
	}
	out.Options = out.Options.WithDefaults()
	if out.SubjectPrefix == "" {
		out.SubjectPrefix = DefaultSubjectPrefix
	}
	if out.AckWait == 0 {
		out.AckWait = DefaultAckWait
	}
	if out.AckTimeout == 0 {
		out.AckTimeout = DefaultAckConfirmTimeout
	}
	if out.MaxAckPending == 0 {
		out.MaxAckPending = DefaultMaxAckPending
	}
	return out
}

func (c *SubscriberConfig) validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
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
	if c.SubjectPrefix != "" && c.SubjectPrefix != NoSubjectPrefix {
		if err := checkSubject(c.SubjectPrefix+".x", false); err != nil {
			errs = append(errs, fmt.Errorf("SubjectPrefix %q: %w", c.SubjectPrefix, err))
		}
	}
	if c.AckWait < 0 {
		errs = append(errs, fmt.Errorf("AckWait is %v, must not be negative", c.AckWait))
	} else if c.AckWait > 0 && c.AckWait < time.Millisecond {
		errs = append(errs, fmt.Errorf("AckWait is %v, must be at least 1ms", c.AckWait))
	}
	if c.MaxAckPending < 0 {
		errs = append(errs, fmt.Errorf("MaxAckPending is %d, must not be negative", c.MaxAckPending))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("AckTimeout is %v, must not be negative", c.AckTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nats subscriber config: %w", err)
	}
	return nil
}
