package rabbitmq

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
)

// The query parameters ConfigFromURL reads into a PublisherConfig.
const (
	paramExchange         = "exchange"
	paramRoutingKeyPrefix = "routing_key_prefix"
	paramConfirmTimeout   = "confirm_timeout"
	paramDialTimeout      = "dial_timeout"
	paramMaxMessageSize   = "max_message_size"
	paramConnectionName   = "connection_name"
	// paramConnectionTimeout is RabbitMQ's URI name of the dial timeout,
	// in milliseconds. amqp091 reads it only when it dials itself, which
	// the publisher never lets it do (PublisherConfig.DialTimeout), so
	// ConfigFromURL reads it instead.
	paramConnectionTimeout = "connection_timeout"
)

// params are the URL parameters ConfigFromURL accepts: the publisher's
// own, taken out of the URL, then amqp091's (RabbitMQ's URI query
// parameters), which stay in it for amqp091 to read.
var params = []backend.Param{
	{Name: paramExchange, Default: "", Usage: `exchange every message is published to ("": the default exchange, which routes to the queue the routing key names)`, Flag: true},
	{Name: paramRoutingKeyPrefix, Default: "", Usage: "prefix of every routing key: the routing key of an event is routing_key_prefix + its topic", Flag: true},
	{Name: paramConfirmTimeout, Default: DefaultConfirmTimeout.String(), Usage: "how long a batch waits for the broker's confirms (a Go duration)"},
	{Name: paramDialTimeout, Default: DefaultDialTimeout.String(), Usage: "bound of each connection attempt, handshake included (a Go duration)"},
	{Name: paramConnectionTimeout, Default: strconv.FormatInt(DefaultDialTimeout.Milliseconds(), 10), Usage: "RabbitMQ's name of dial_timeout, in milliseconds; give one of the two"},
	{Name: paramMaxMessageSize, Default: strconv.Itoa(DefaultMaxMessageSize), Usage: "largest payload in bytes; a larger message fails for good, unsent (keep it at most the server's max_message_size)"},
	{Name: paramConnectionName, Default: DefaultName, Usage: "connection name the management UI shows"},
	{Name: "heartbeat", Default: "10", Usage: "amqp091: heartbeat interval in seconds (0: the server's)"},
	{Name: "channel_max", Default: "0", Usage: "amqp091: most channels on the connection (0: the server's)"},
	{Name: "auth_mechanism", Default: "plain", Usage: "amqp091: SASL mechanism: plain, amqplain or external (may repeat)"},
	{Name: "cacertfile", Default: "", Usage: "amqp091, amqps://: CA certificates to trust, PEM (default: the system's)"},
	{Name: "certfile", Default: "", Usage: "amqp091, amqps://: client certificate, PEM (with keyfile)"},
	{Name: "keyfile", Default: "", Usage: "amqp091, amqps://: client key, PEM (with certfile)"},
	{Name: "server_name_indication", Default: "", Usage: "amqp091, amqps://: the server name TLS expects (default: the host)"},
}

// ConfigFromURL parses an amqp:// or amqps:// URL into a PublisherConfig:
// amqp://user:password@host:port/vhost?exchange=…&routing_key_prefix=…
// Every PublisherConfig setting but the routing key function and amqp091's
// own configuration has a query parameter (see the package
// documentation); an empty value, or zero, means the default. The
// publisher's parameters are removed from PublisherConfig.URL; amqp091's
// stay in it. An unknown parameter, a repeated one or a bad value is an
// error that names it; the password never appears in an error.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("rabbitmq publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return fail("scheme %q, want amqp or amqps", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("malformed query (a bad %%-escape?)")
	}
	known := map[string]bool{}
	for _, p := range params {
		known[p.Name] = true
	}
	for k, vs := range q {
		switch {
		case !known[k]:
			return fail("unknown parameter %q (known: %s)", k, paramNames())
		case len(vs) > 1 && k != "auth_mechanism":
			return fail("parameter %q given %d times", k, len(vs))
		}
	}
	cfg := &PublisherConfig{Exchange: q.Get(paramExchange), Name: q.Get(paramConnectionName)}
	if prefix := q.Get(paramRoutingKeyPrefix); prefix != "" {
		cfg.RoutingKey = func(topic string) string { return prefix + topic }
	}
	if cfg.ConfirmTimeout, err = duration(q, paramConfirmTimeout); err != nil {
		return fail("%v", err)
	}
	if cfg.DialTimeout, err = duration(q, paramDialTimeout); err != nil {
		return fail("%v", err)
	}
	if v := q.Get(paramConnectionTimeout); v != "" {
		if q.Get(paramDialTimeout) != "" {
			return fail("%s and %s say the same: give one", paramDialTimeout, paramConnectionTimeout)
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return fail("%s %q: want milliseconds, not negative", paramConnectionTimeout, v)
		}
		cfg.DialTimeout = time.Duration(ms) * time.Millisecond
	}
	if v := q.Get(paramMaxMessageSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fail("%s %q: want a number of bytes, not negative", paramMaxMessageSize, v)
		}
		cfg.MaxMessageSize = n
	}
	for _, p := range []string{paramExchange, paramRoutingKeyPrefix, paramConfirmTimeout, paramDialTimeout,
		paramConnectionTimeout, paramMaxMessageSize, paramConnectionName} {
		q.Del(p)
	}
	u.RawQuery = q.Encode()
	cfg.URL = u.String()
	if err := checkURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("rabbitmq publisher: %w", err)
	}
	return cfg, nil
}

// duration is the Go duration of parameter name, 0 when absent or empty.
func duration(q url.Values, name string) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q: want a Go duration (5s, 1m30s), not negative", name, v)
	}
	return d, nil
}

// paramNames lists the parameters ConfigFromURL accepts.
func paramNames() string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
