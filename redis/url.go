package redis

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/outboxgo/outbox/internal/redact"
)

// ConfigFromURL parses a redis:// or rediss:// URL into a Config; see the
// package documentation for the query parameters. The parameters it reads
// are removed from Config.URL; the others stay for go-redis.
func ConfigFromURL(rawURL string) (Config, error) {
	var cfg Config
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("redis publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fail("scheme %q, want redis or rediss", u.Scheme)
	}
	q := u.Query()
	cfg.StreamPrefix = q.Get("stream_prefix")
	if v := q.Get("maxlen"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fail("maxlen: %v", err)
		}
		cfg.MaxLen = n
	}
	if v := q.Get("max_payload"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fail("max_payload: %v", err)
		}
		cfg.MaxPayload = n
	}
	for _, k := range []string{"stream_prefix", "maxlen", "max_payload"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	if _, err := options(cfg.URL); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// NewFromURL returns a Publisher configured by a redis:// URL, for a CLI
// that picks the publisher by scheme.
func NewFromURL(rawURL string) (*Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}
