package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/redact"
)

// Config configures a Publisher. The zero value appends to streams named
// by the topics on the Redis at redis://127.0.0.1:6379/0.
type Config struct {
	// URL is the Redis URL (see redis.ParseURL). Default DefaultURL.
	// Ignored when Client is set.
	URL string
	// Client is an existing client to publish with. When set, New does not
	// connect and Close does not close it; give it ContextTimeoutEnabled,
	// or Publish may outlast its context's deadline by the client's
	// ReadTimeout. Default nil: New makes one from URL.
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
	// 512 MiB (Redis's default proto-max-bulk-len) minus 1 KiB.
	MaxPayload int
}

// Defaults of Config.
const (
	DefaultURL        = "redis://127.0.0.1:6379/0"
	DefaultMaxPayload = 512<<20 - 1<<10
)

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.URL == "" && c.Client == nil {
		c.URL = DefaultURL
	}
	if c.MaxPayload == 0 {
		c.MaxPayload = DefaultMaxPayload
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.MaxLen < 0 {
		errs = append(errs, fmt.Errorf("MaxLen is %d, must not be negative", c.MaxLen))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, fmt.Errorf("MaxPayload is %d, must not be negative", c.MaxPayload))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redis publisher config: %w", err)
	}
	return nil
}

// options parses the URL into client options, with command retries off
// unless the URL sets max_retries, Publish's context deadline bounding
// the socket reads and writes (without it go-redis waits up to its
// ReadTimeout, 5 s by default, whatever the deadline), and a PING that
// ends the setup of every new connection.
//
// The PING is how a URL without the password a server requires fails at
// once: go-redis then sends no AUTH, the connection is set up
// unauthenticated, and the server would answer a pipeline of XADDs with
// "ERR Protocol error: unauthenticated multibulk length" and a closed
// connection rather than NOAUTH. With it every command of the pipeline
// fails with NOAUTH (Misconfigured), none is sent.
func options(rawURL string) (*goredis.Options, error) {
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis publisher: URL %s: %s", redact.URL(rawURL), redact.Text(err.Error()))
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = -1
	}
	opts.ContextTimeoutEnabled = true
	opts.OnConnect = func(ctx context.Context, cn *goredis.Conn) error {
		if err := cn.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("set up the connection: PING: %w", err)
		}
		return nil
	}
	return opts, nil
}
