package kafka

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/subscribers"
)

// SubscriberConfig configures a Subscriber. Topics, Group and
// DeadLetterTopic are required; zero means the default for every other
// field.
type SubscriberConfig struct {
	// Options are the knobs every subscriber has: MaxDeliveries, Backoff,
	// ShutdownTimeout, Logger, Hooks (see subscribers.Options for their
	// defaults). Backoff spaces the retries of a record, which are made
	// in place: its partition waits meanwhile (see the package doc).
	//
	// Concurrency is ignored: the subscriber handles the records of a
	// partition one at a time, in order, and the partitions it is
	// assigned in parallel. To handle more records at once, give the
	// topics more partitions and the group more members. A negative
	// Concurrency is refused all the same.
	subscribers.Options

	// Brokers are the seed brokers, "host:port". Default
	// [DefaultBroker] ("127.0.0.1:9092").
	Brokers []string
	// ClientID names the client to the brokers. Default DefaultClientID
	// ("outbox").
	ClientID string
	// ClientOptions are more franz-go options (TLS, SASL, session
	// timeout…), applied after the subscriber's own. A kgo.WithLogger
	// here replaces the subscriber's logger, through which Start notices
	// the brokers refusing the SASL credentials. Default none.
	ClientOptions []kgo.Opt

	// Topics are the Kafka topics to consume. Required.
	Topics []string
	// TopicPrefix is stripped from a record's topic to give
	// inbox.Message.Topic: the publisher's TopicPrefix. Default "".
	TopicPrefix string
	// Group is the consumer group. Instances with the same Group share the
	// partitions. A new group starts at the earliest offset. Required.
	Group string

	// DeadLetterTopic receives the records that exhausted
	// Options.MaxDeliveries or failed permanently, with the error in the
	// Outbox-Error header. It must exist (or the brokers create topics on
	// use) and must not be one of Topics. Required.
	DeadLetterTopic string
	// CommitTimeout bounds each offset commit and dead-letter produce.
	// Default DefaultCommitTimeout (10 s).
	CommitTimeout time.Duration
}

// DefaultCommitTimeout is SubscriberConfig.CommitTimeout's default.
const DefaultCommitTimeout = 10 * time.Second

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default, the Options' included.
func (c *SubscriberConfig) WithDefaults() SubscriberConfig {
	var out SubscriberConfig
	if c != nil {
		out = *c
	}
	out.Options = out.Options.WithDefaults()
	if len(out.Brokers) == 0 {
		out.Brokers = []string{DefaultBroker}
	}
	if out.ClientID == "" {
		out.ClientID = DefaultClientID
	}
	if out.CommitTimeout == 0 {
		out.CommitTimeout = DefaultCommitTimeout
	}
	return out
}

// Validate reports what NewSubscriber refuses, each by field name: a
// missing Topics, Group or DeadLetterTopic, a DeadLetterTopic that is one
// of Topics, an empty broker address, a negative CommitTimeout, and what
// Options.Validate refuses (negative numbers and durations, an impossible
// Backoff). It does not apply the defaults.
func (c *SubscriberConfig) Validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
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
	for _, b := range c.Brokers {
		if b == "" {
			errs = append(errs, errors.New("Brokers: empty broker address"))
		}
	}
	if c.CommitTimeout < 0 {
		errs = append(errs, fmt.Errorf("CommitTimeout %v: must not be negative", c.CommitTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka subscriber config: %w", err)
	}
	return nil
}
