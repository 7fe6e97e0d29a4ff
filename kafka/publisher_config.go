package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Publisher. The zero value produces to a broker at
// 127.0.0.1:9092, to the topic named by each message's topic.
type Config struct {
	// Brokers are the seed brokers, "host:port". Default
	// ["127.0.0.1:9092"].
	Brokers []string
	// ClientID is the client ID the brokers see. Default "outbox".
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
	// the topics' max.message.bytes. Default 1,000,012 (Kafka's default).
	MaxRecordBytes int
	// DeliveryTimeout is how long a record may wait for its
	// acknowledgement (kgo.RecordDeliveryTimeout), whatever the context
	// says; past it the record fails as unavailable. Default 30s.
	DeliveryTimeout time.Duration
	// DialTimeout bounds each connection attempt. Default 5s.
	DialTimeout time.Duration

	// Options are extra franz-go options (TLS, SASL, linger, …), applied
	// after the publisher's own so they may override them — except acks,
	// which stay acks=all. They must not disable idempotent writes
	// (kgo.DisableIdempotentWrite): ordered retries rest on them. A
	// kgo.WithLogger here replaces the publisher's logger, through which
	// it notices the brokers refusing the SASL credentials. Default none.
	Options []kgo.Opt

	// Logger receives the client's warnings and errors. Default: a logger
	// that discards everything.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultBroker          = "127.0.0.1:9092"
	DefaultClientID        = "outbox"
	DefaultMaxRecordBytes  = 1000012
	DefaultDeliveryTimeout = 30 * time.Second
	DefaultDialTimeout     = 5 * time.Second
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if len(c.Brokers) == 0 {
		c.Brokers = []string{DefaultBroker}
	}
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.MaxRecordBytes == 0 {
		c.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if c.DeliveryTimeout == 0 {
		c.DeliveryTimeout = DefaultDeliveryTimeout
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
	for _, b := range c.Brokers {
		if b == "" {
			errs = append(errs, errors.New("empty broker address"))
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
func (c Config) clientOptions(ref *refusals) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(c.ClientID),
		kgo.ProducerBatchMaxBytes(int32(c.MaxRecordBytes)),
		kgo.RecordDeliveryTimeout(c.DeliveryTimeout),
		kgo.DialTimeout(c.DialTimeout),
		kgo.WithLogger(&logger{l: c.Logger, ref: ref}),
		kgo.WithHooks(saslHook{ref}),
	}
	opts = append(opts, c.Options...)
	// What the guarantees rest on comes last, so Options cannot undo it.
	return append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
}

// logger adapts slog to kgo.Logger, warnings and errors only, and
// reports the brokers' refusals of the client to ref.
type logger struct {
	l   *slog.Logger
	ref *refusals
}

func (g *logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (g *logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	for i := 1; i < len(keyvals); i += 2 {
		if err, ok := keyvals[i].(error); ok {
			g.ref.report(err)
			keyvals[i] = redactText(err.Error())
		}
	}
	g.l.Log(context.Background(), lv, "kafka publisher: "+msg, keyvals...)
}
