package kafka

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// PublisherConfig configures a Publisher. Zero means the default, for
// every field: the zero value (or a nil *PublisherConfig) produces to a
// broker at 127.0.0.1:9092, to the topic named by each message's topic.
type PublisherConfig struct {
	// Brokers are the seed brokers, "host:port". Default
	// [DefaultBroker] ("127.0.0.1:9092").
	Brokers []string
	// ClientID is the client ID the brokers see. Default DefaultClientID
	// ("outbox").
	ClientID string

	// TopicPrefix, when set, puts every message on the Kafka topic
	// TopicPrefix + topic (no separator is added). Default "".
	TopicPrefix string
	// Topic maps an outbox topic to a Kafka topic, overriding
	// TopicPrefix. Default nil.
	Topic func(topic string) string

	// MaxRecordBytes is the largest produce batch the client builds, and
	// so the largest record it sends (kgo.ProducerBatchMaxBytes); a larger
	// record fails as permanent without being sent. Keep it at or below
	// the topics' max.message.bytes. Default DefaultMaxRecordBytes
	// (1,000,012, Kafka's default).
	MaxRecordBytes int
	// DeliveryTimeout is how long a record may wait for its
	// acknowledgement (kgo.RecordDeliveryTimeout), whatever the context
	// says; past it the record fails as unavailable. Default
	// DefaultDeliveryTimeout (30 s).
	DeliveryTimeout time.Duration
	// DialTimeout bounds each connection attempt. Default
	// DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// NoKeyRuns turns key runs off: KeepsKeyOrder reports false and the
	// relay keeps one event of a key in flight, one round trip each. By
	// default (false) the publisher keeps each key's order within a call
	// by itself, and the relay sends a batch's events of a key in one
	// pipelined call (see the package documentation, "Key order within a
	// call"). Turn them off with a kgo.RecordPartitioner in ClientOptions
	// that does not put all of a key's records on one partition.
	NoKeyRuns bool

	// ClientOptions are extra franz-go options (TLS, SASL,
	// kgo.ProducerLinger — the publisher does not linger by default —, …),
	// applied after the publisher's own so they may override them —
	// except acks, which stay acks=all, and, for the clients of calls
	// carrying key runs, the buffer limits (kgo.MaxBufferedRecords,
	// kgo.MaxBufferedBytes), which stay off there. They must not disable
	// idempotent writes (kgo.DisableIdempotentWrite): ordered retries rest
	// on them. A kgo.WithLogger here replaces the publisher's logger,
	// through which it notices the brokers refusing the SASL credentials.
	// Default none.
	ClientOptions []kgo.Opt

	// Logger receives the client's warnings and errors. Default: a logger
	// that discards everything.
	Logger *slog.Logger
}

// Defaults of PublisherConfig (DefaultBroker and DefaultClientID are
// SubscriberConfig's too).
const (
	DefaultBroker          = "127.0.0.1:9092"
	DefaultClientID        = "outbox"
	DefaultMaxRecordBytes  = 1000012
	DefaultDeliveryTimeout = 30 * time.Second
	DefaultDialTimeout     = 5 * time.Second
)

// WithDefaults returns a copy of c (which may be nil) with every zero
// field set to its default.
func (c *PublisherConfig) WithDefaults() PublisherConfig {
	var out PublisherConfig
	if c != nil {
		out = *c
	}
	if len(out.Brokers) == 0 {
		out.Brokers = []string{DefaultBroker}
	}
	if out.ClientID == "" {
		out.ClientID = DefaultClientID
	}
	if out.MaxRecordBytes == 0 {
		out.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if out.DeliveryTimeout == 0 {
		out.DeliveryTimeout = DefaultDeliveryTimeout
	}
	if out.DialTimeout == 0 {
		out.DialTimeout = DefaultDialTimeout
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// validate reports the fields no publisher can run with, each by name:
// an empty broker address, a negative (or too large) MaxRecordBytes, a
// negative timeout.
func (c *PublisherConfig) validate() error {
	var errs []error
	for _, b := range c.Brokers {
		if b == "" {
			errs = append(errs, errors.New("Brokers: empty broker address"))
		}
	}
	if c.MaxRecordBytes < 0 || int64(c.MaxRecordBytes) > 1<<31-1 {
		errs = append(errs, fmt.Errorf("MaxRecordBytes is %d, must be in [0, 2^31)", c.MaxRecordBytes))
	}
	if c.DeliveryTimeout < 0 {
		errs = append(errs, fmt.Errorf("DeliveryTimeout is %v, must not be negative", c.DeliveryTimeout))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("DialTimeout is %v, must not be negative", c.DialTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka publisher config: %w", err)
	}
	return nil
}

// clientOptions are the franz-go options of a publisher of c, whose
// logger reports refusals to ref.
func (c *PublisherConfig) clientOptions(ref *refusals) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.ProducerBatchMaxBytes(int32(c.MaxRecordBytes)),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
		kgo.DialTimeout(c.DialTimeout),
		// No linger (franz-go's default is 10ms): Publish hands a call's
		// records over at once, and records gather into the next batch
		// while a request is in flight anyway; a linger would only delay
		// a call of one record (a hot key in ordered mode) that long.
		kgo.ProducerLinger(0),
		kgo.WithLogger(&logger{l: c.Logger, ref: ref, prefix: "kafka publisher: "}),
		kgo.WithHooks(saslHook{ref}),
	}
	opts = append(opts, c.ClientOptions...)
	// What the guarantees rest on comes last, so ClientOptions cannot undo it.
	return append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
}
