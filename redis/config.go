package redis

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/subscribers"
)

// PublisherConfig configures a Publisher. Zero means the default, for
// every field: the zero value appends to streams named by the topics on
// the Redis at redis://127.0.0.1:6379/0.
type PublisherConfig struct {
	// URL is the Redis URL, redis:// or rediss:// (see redis.ParseURL; its
	// connection options, dial_timeout and the others, are go-redis's).
	// Default DefaultURL. Ignored when Client is set.
	URL string
	// Client is an existing client to publish with. When set, NewPublisher
	// does not connect and Close does not close it; give it
	// ContextTimeoutEnabled, or Publish may outlast its context's deadline
	// by the client's ReadTimeout. Default nil: NewPublisher makes one from
	// URL.
	Client goredis.UniversalClient

	// StreamPrefix, when set, puts every message on the stream
	// StreamPrefix + topic (no separator is added). Default "".
	StreamPrefix string
	// Stream maps a topic to a stream key, overriding StreamPrefix.
	// Default nil.
	Stream func(topic string) string

	// MaxLen, when positive, trims each stream to about MaxLen entries on
	// every XADD (MAXLEN ~ MaxLen). Default 0: no trimming.
	MaxLen int64
	// MaxPayload is the largest payload the publisher sends, and the
	// largest headers field (the headers' JSON); a larger one fails as
	// permanent without being sent. Keep it at most the server's
	// proto-max-bulk-len: Redis answers a longer bulk string by closing the
	// connection, which fails the whole pipeline as an outage. Default
	// DefaultMaxPayload: 512 MiB (Redis's default proto-max-bulk-len)
	// minus 1 KiB.
	MaxPayload int

	// NoKeyRuns turns key runs off: KeepsKeyOrder reports false, every
	// message is an XADD of its own, and the relay keeps one event of a
	// key in flight. By default (false) the publisher keeps each key's
	// order by itself wherever it can (one server, a user who may run
	// EVAL; see KeepsKeyOrder), and the relay sends a batch's events of a
	// key in one call.
	NoKeyRuns bool

	// Logger receives the publisher's logs. Default: discarded. (go-redis
	// logs through its own process-wide logger, redis.SetLogger: a main
	// program's decision.)
	Logger *slog.Logger
}

// Defaults of PublisherConfig.
const (
	DefaultURL        = "redis://127.0.0.1:6379/0"
	DefaultMaxPayload = 512<<20 - 1<<10
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.URL == "" && c.Client == nil {
		c.URL = DefaultURL
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c PublisherConfig) validate() error {
	var errs []error
	if c.MaxLen < 0 {
		errs = append(errs, fmt.Errorf("MaxLen %d: must not be negative", c.MaxLen))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, fmt.Errorf("MaxPayload %d: must not be negative", c.MaxPayload))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redis publisher config: %w", err)
	}
	return nil
}

// SubscriberConfig configures a Subscriber. Streams, Group and
// DeadLetterStream are required; zero means the default for every other
// field.
//
// Of the embedded subscribers.Options, Backoff has a Redis default: a
// failed entry waits in the pending list until it has been idle for
// ClaimIdle, so Backoff.Max may not exceed ClaimIdle. The zero Backoff is
// subscribers.DefaultBackoff with Min and Max capped at ClaimIdle (1 s to
// 1 min with the default ClaimIdle); a Backoff with Min set and Max zero
// gets Max = subscribers.DefaultBackoff.Max capped at ClaimIdle (and at
// least Min).
type SubscriberConfig struct {
	subscribers.Options

	// Streams are the streams to consume (the Publisher writes topic T to
	// StreamPrefix+T). Required.
	Streams []string
	// StreamPrefix is stripped from a stream's name to give
	// inbox.Message.Topic: the publisher's StreamPrefix. Default "": the
	// topic is the stream's name.
	StreamPrefix string
	// Group is the consumer group, created (with MKSTREAM, reading from the
	// start of the stream) by Start when missing. Instances with the same
	// Group share the work. Required.
	Group string
	// Consumer names this instance within the group. Default: a random
	// name. Give a stable name to have a restarted instance own its
	// predecessor's pending entries (they are reclaimed either way).
	Consumer string

	// DeadLetterStream receives entries that exhausted MaxDeliveries or
	// failed permanently: the original fields plus the FieldError and
	// FieldDead* fields. It must not be one of Streams. Required.
	DeadLetterStream string
	// ClaimIdle is how long an entry must be idle (neither delivered nor
	// kept alive) before any instance of the group claims it with
	// XAUTOCLAIM: the time a crashed consumer's entries wait. While a
	// handler runs, its entry is kept alive every ClaimIdle/3. At least
	// 3 ms. Default DefaultClaimIdle (1 min).
	ClaimIdle time.Duration
	// PollInterval is how often the subscriber looks for entries to claim
	// (failed entries whose backoff has passed, entries of crashed
	// consumers); while a claim fills every free handler slot, it claims
	// again as soon as a slot is free. At least 1 ms. Default
	// DefaultPollInterval (1 s).
	PollInterval time.Duration
	// Block is how long an XREADGROUP waits for new entries; Stop may wait
	// this long for the read to return. At least 1 ms. Default
	// DefaultBlock (1 s).
	Block time.Duration
	// OpTimeout bounds each Redis command other than the blocking read.
	// Default DefaultOpTimeout (5 s).
	OpTimeout time.Duration
}

// Defaults of SubscriberConfig; those of its Options are subscribers'.
const (
	DefaultClaimIdle    = time.Minute
	DefaultPollInterval = time.Second
	DefaultBlock        = time.Second
	DefaultOpTimeout    = 5 * time.Second
)

// WithDefaults returns a copy of c with every zero field set to its
// default, the embedded Options' included.
func (c SubscriberConfig) WithDefaults() SubscriberConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.ClaimIdle, DefaultClaimIdle)
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.Block, DefaultBlock)
	def(&c.OpTimeout, DefaultOpTimeout)
	switch b := &c.Backoff; {
	case *b == (outbox.Backoff{}):
		*b = subscribers.DefaultBackoff
		if c.ClaimIdle > 0 {
			b.Min, b.Max = min(b.Min, c.ClaimIdle), min(b.Max, c.ClaimIdle)
		}
	case b.Max == 0 && b.Min >= 0:
		b.Max = max(b.Min, min(subscribers.DefaultBackoff.Max, c.ClaimIdle))
	}
	c.Options = c.Options.WithDefaults()
	if c.Consumer == "" {
		c.Consumer = fmt.Sprintf("outbox-%016x", rand.Uint64())
	}
	return c
}

// Validate reports what NewSubscriber refuses in c, each field by name:
// the embedded Options' Validate, which it shadows, and Redis's own
// fields.
func (c *SubscriberConfig) Validate() error { return c.WithDefaults().validate() }

// validate reports what c (with its defaults) cannot run with, each field
// by name.
func (c SubscriberConfig) validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Streams) == 0 {
		errs = append(errs, errors.New("Streams is required"))
	}
	for _, s := range c.Streams {
		if s == "" {
			errs = append(errs, errors.New("Streams holds an empty name"))
		}
		if s == c.DeadLetterStream {
			errs = append(errs, fmt.Errorf("DeadLetterStream %q is one of Streams", s))
		}
	}
	if c.Group == "" {
		errs = append(errs, errors.New("Group is required"))
	}
	if c.DeadLetterStream == "" {
		errs = append(errs, errors.New("DeadLetterStream is required"))
	}
	atLeast := func(name string, d, least time.Duration) {
		switch {
		case d < 0:
			errs = append(errs, fmt.Errorf("%s %v: must not be negative", name, d))
		case d < least:
			errs = append(errs, fmt.Errorf("%s %v: must be at least %v", name, d, least))
		}
	}
	atLeast("ClaimIdle", c.ClaimIdle, 3*time.Millisecond)
	atLeast("PollInterval", c.PollInterval, time.Millisecond)
	atLeast("Block", c.Block, time.Millisecond)
	atLeast("OpTimeout", c.OpTimeout, 0)
	if c.Backoff.Max > c.ClaimIdle && c.ClaimIdle > 0 {
		errs = append(errs, fmt.Errorf("Backoff.Max %v exceeds ClaimIdle %v", c.Backoff.Max, c.ClaimIdle))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redis subscriber config: %w", err)
	}
	return nil
}

// retryDelay is the backoff after the delivery-th failure, never above
// Backoff.Max (which stays within ClaimIdle), jitter included.
func (c *SubscriberConfig) retryDelay(delivery int) time.Duration {
	return min(c.Backoff.Delay(delivery), c.Backoff.Max)
}
