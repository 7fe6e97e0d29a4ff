package sidekiq

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/redact"
)

// The URL schemes: sidekiq and sidekiq+redis are Redis over TCP,
// sidekiq+rediss Redis over TLS.
const (
	Scheme       = "sidekiq"
	SchemeRedis  = "sidekiq+redis"
	SchemeRediss = "sidekiq+rediss"
)

// The publisher's own URL parameters; the others are go-redis's.
const (
	paramNamespace  = "namespace"
	paramClass      = "class"
	paramQueue      = "queue"
	paramRetry      = "retry"
	paramMaxPayload = "max_payload"
)

var ownParams = []string{paramNamespace, paramClass, paramQueue, paramRetry, paramMaxPayload}

// ConfigFromURL parses a sidekiq://, sidekiq+redis:// or sidekiq+rediss://
// URL into a PublisherConfig: the publisher's own query parameters
// (namespace, class, queue, retry, max_payload; see the package
// documentation) set its fields and are removed from the URL, which
// becomes PublisherConfig.URL with the scheme redis (rediss for
// sidekiq+rediss); go-redis's parameters (dial_timeout, read_timeout,
// max_retries, … see redis.ParseURL) stay in it for the client. Any other
// parameter is an error that names it. Errors never print the URL's
// password.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("sidekiq publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case Scheme, SchemeRedis:
		u.Scheme = "redis"
	case SchemeRediss:
		u.Scheme = "rediss"
	default:
		return fail("scheme %q, want %s, %s or %s", u.Scheme, Scheme, SchemeRedis, SchemeRediss)
	}
	q := u.Query()
	cfg := &PublisherConfig{Namespace: q.Get(paramNamespace), Class: q.Get(paramClass),
		Queue: q.Get(paramQueue), Retry: q.Get(paramRetry)}
	if cfg.Class != "" && !rubyConstant.MatchString(cfg.Class) {
		return fail("%s %q: want a Ruby class name (OrderJob, Billing::EventJob)", paramClass, cfg.Class)
	}
	if cfg.Retry != "" {
		if _, err := retryJSON(cfg.Retry); err != nil {
			return fail("%s %v", paramRetry, err)
		}
	}
	if v := q.Get(paramMaxPayload); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail("%s %q: want a number of bytes, 0 or more", paramMaxPayload, v)
		}
		cfg.MaxPayload = n
	}
	for _, k := range ownParams {
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
// unless the URL sets max_retries (a retried LPUSH whose first attempt
// reached Redis would push the job twice), Publish's context deadline
// bounding the socket reads and writes, and a PING that ends the setup of
// every new connection: without it a URL lacking the password a server
// requires would set the connection up unauthenticated, and the server
// would answer the pipeline with a protocol error and a closed connection
// rather than NOAUTH.
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
		msg = fmt.Sprintf("%s %s (the publisher reads %s; go-redis its connection options, see redis.ParseURL)",
			what, quoteList(names), strings.Join(ownParams, ", "))
	}
	return fmt.Errorf("sidekiq publisher: URL %s: %s", redact.URL(rawURL), msg)
}

// quoteList quotes each name of go-redis's comma-separated list.
func quoteList(names string) string {
	list := strings.Split(names, ", ")
	for i, n := range list {
		list[i] = strconv.Quote(n)
	}
	return strings.Join(list, ", ")
}
