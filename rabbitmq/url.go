package rabbitmq

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/outboxgo/outbox/internal/redact"
)

// ConfigFromURL parses an amqp:// or amqps:// URL into a Config; see the
// package documentation for the query parameters. The parameters it reads
// are removed from Config.URL; the others stay for amqp091.
func ConfigFromURL(rawURL string) (Config, error) {
	var cfg Config
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("rabbitmq publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return fail("scheme %q, want amqp or amqps", u.Scheme)
	}
	q := u.Query()
	if q.Has("exchange") {
		cfg.Exchange = q.Get("exchange")
	}
	if prefix := q.Get("routing_key_prefix"); prefix != "" {
		cfg.RoutingKey = func(topic string) string { return prefix + topic }
	}
	if v := q.Get("confirm_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fail("confirm_timeout: %v", err)
		}
		cfg.ConfirmTimeout = d
	}
	if v := q.Get("max_message_size"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fail("max_message_size: %v", err)
		}
		cfg.MaxMessageSize = n
	}
	cfg.Name = q.Get("connection_name")
	for _, k := range []string{"exchange", "routing_key_prefix", "confirm_timeout", "max_message_size", "connection_name"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	return cfg, nil
}

// NewFromURL returns a Publisher configured by an amqp:// URL, for a CLI
// that picks the publisher by scheme.
func NewFromURL(rawURL string) (*Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}
