package redis

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/redact"
)

// The publisher's own URL parameters; the others are go-redis's.
const (
	paramStreamPrefix = "stream_prefix"
	paramMaxLen       = "maxlen"
	paramMaxPayload   = "max_payload"
	paramKeyRuns      = "key_runs"
)

// ConfigFromURL parses a redis:// or rediss:// URL into a PublisherConfig:
// the publisher's own query parameters (stream_prefix, maxlen,
// max_payload, key_runs; see the package documentation) set its fields and are
// removed from PublisherConfig.URL; go-redis's (dial_timeout,
// read_timeout, max_retries, … see redis.ParseURL) stay in the URL for
// the client. Any other parameter is an error that names it. Errors never
// print the URL's password.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("redis publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fail("scheme %q, want redis or rediss", u.Scheme)
	}
	q := u.Query()
	cfg := &PublisherConfig{StreamPrefix: q.Get(paramStreamPrefix)}
	if v := q.Get(paramMaxLen); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fail("%s %q: want a number of entries, 0 or more", paramMaxLen, v)
		}
		cfg.MaxLen = n
	}
	if v := q.Get(paramMaxPayload); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail("%s %q: want a number of bytes, 0 or more", paramMaxPayload, v)
		}
		cfg.MaxPayload = n
	}
	if v := q.Get(paramKeyRuns); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s %q: want true or false", paramKeyRuns, v)
		}
		cfg.NoKeyRuns = !on
	}
	for _, k := range []string{paramStreamPrefix, paramMaxLen, paramMaxPayload, paramKeyRuns} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	if _, err := goredis.ParseURL(cfg.URL); err != nil {
		return nil, urlError(rawURL, err) // the URL as the user wrote it
	}
	return cfg, nil
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
		return nil, urlError(rawURL, err)
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

// urlError is go-redis's error parsing rawURL, naming the URL without its
// password; an unknown parameter is said as such.
func urlError(rawURL string, err error) error {
	msg := redact.Text(err.Error())
	if names, ok := strings.CutPrefix(err.Error(), "redis: unexpected option: "); ok {
		what := "unknown parameter"
		if strings.Contains(names, ", ") {
			what += "s"
		}
		msg = fmt.Sprintf("%s %s (the publisher reads %s, %s, %s and %s; go-redis its connection options, see redis.ParseURL)",
			what, quoteList(names), paramStreamPrefix, paramMaxLen, paramMaxPayload, paramKeyRuns)
	}
	return fmt.Errorf("redis publisher: URL %s: %s", redact.URL(rawURL), msg)
}

// quoteList quotes each name of go-redis's comma-separated list.
func quoteList(names string) string {
	list := strings.Split(names, ", ")
	for i, n := range list {
		list[i] = strconv.Quote(n)
	}
	return strings.Join(list, ", ")
}
