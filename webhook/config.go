package webhook

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/webhook/verify"
)

// Config configures a Publisher. Endpoint or Endpoints is required; zero
// means the default for every other field.
type Config struct {
	// Endpoint is the URL, http:// or https://, every topic is posted to
	// unless Endpoints names the topic. The text {topic} in its path is
	// replaced by the topic, path-escaped ("/" included). A user-info
	// (user:password@) is sent as HTTP Basic authentication, never
	// printed. Default "": only the topics of Endpoints are posted.
	Endpoint string
	// Endpoints maps topics to URLs of their own (each like Endpoint,
	// {topic} included), overriding Endpoint. Default nil.
	Endpoints map[string]string
	// Secrets sign every request: one webhook-signature per secret, each
	// "whsec_" + base64 of 24 to 512 random bytes. Give the new and the
	// old secret during a key rotation. Default none: requests go
	// unsigned (a warning is logged), which no Standard Webhooks receiver
	// accepts.
	Secrets []string
	// Timeout bounds each request, from dialing to the end of reading the
	// response; a request that takes longer fails as unavailable. Default
	// DefaultTimeout (15 s, the lower end of the specification's advice).
	Timeout time.Duration
	// MaxInFlight bounds the requests in flight to one endpoint host (and
	// the connections to it, which are reused). Default DefaultMaxInFlight.
	MaxInFlight int
	// MaxPayload, when positive, is the largest body the publisher sends;
	// a larger message fails as permanent, unsent. Default 0: no limit
	// (the receiver's own answers 413, which is permanent as well).
	MaxPayload int
	// ContentType is the Content-Type of every request, unless a message
	// has a Content-Type header of its own. Default DefaultContentType.
	ContentType string
	// AllowPrivate lets requests go to loopback, private (RFC 1918,
	// fc00::/7), link-local, unspecified and multicast addresses, which
	// the publisher refuses by default (the SSRF guard). Default false.
	AllowPrivate bool
	// AllowCIDRs are address ranges allowed despite the guard: the
	// receivers of a private network, 127.0.0.1/32 for a test. Default
	// none.
	AllowCIDRs []netip.Prefix
	// TLS configures the TLS client of https:// endpoints: a private CA's
	// RootCAs, a client certificate. Default nil: the system's roots.
	TLS *tls.Config
	// Clock gives the webhook-timestamp of every attempt. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultTimeout     = 15 * time.Second
	DefaultMaxInFlight = 16
	DefaultContentType = "application/octet-stream"
)

// WithDefaults returns a copy of c with every zero field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.ContentType == "" {
		c.ContentType = DefaultContentType
	}
	if c.Clock == nil {
		c.Clock = outbox.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// endpoint is a parsed endpoint URL: everything but the user-info, which
// is kept apart for Basic authentication.
type endpoint struct {
	raw        string   // as configured, for nothing but parsing
	shown      string   // redacted, for errors and logs
	u          *url.URL // without user-info
	user, pass string
	hasUser    bool
	template   bool // the path holds {topic}
}

// topicPlaceholder is replaced by the topic in an endpoint's path.
const topicPlaceholder = "{topic}"

// parseEndpoint checks an endpoint URL; errors never show its secrets.
func parseEndpoint(what, raw string) (*endpoint, error) {
	shown := redact.URL(raw)
	fail := func(format string, args ...any) (*endpoint, error) {
		return nil, fmt.Errorf("%s %s: %s", what, shown, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fail("not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fail("scheme %q, want http or https", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fail("no host")
	case u.Fragment != "" || u.RawFragment != "":
		return fail("a fragment is never sent to a server")
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return fail("port %q is not a number from 1 to 65535", p)
		}
	}
	e := &endpoint{raw: raw, shown: shown}
	if u.User != nil {
		e.user, e.hasUser = u.User.Username(), true
		e.pass, _ = u.User.Password()
	}
	c := *u
	c.User = nil
	e.u = &c
	e.template = strings.Contains(u.Path, topicPlaceholder)
	if strings.Contains(u.RawQuery, topicPlaceholder) || strings.Contains(u.RawQuery, "%7Btopic%7D") {
		return fail("{topic} goes in the path, not the query")
	}
	return e, nil
}

// forTopic is the URL to post topic's messages to.
func (e *endpoint) forTopic(topic string) string {
	if !e.template {
		return e.u.String()
	}
	seg := url.PathEscape(topic)
	if seg == "." || seg == ".." { // a path segment servers would resolve
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	path := strings.ReplaceAll(e.u.EscapedPath(), "%7Btopic%7D", topicPlaceholder)
	out := e.u.Scheme + "://" + e.u.Host + strings.ReplaceAll(path, topicPlaceholder, seg)
	if e.u.RawQuery != "" {
		out += "?" + e.u.RawQuery
	}
	return out
}

// validate reports what c (with its defaults) cannot run with, each field
// by name; it returns the parsed endpoints and secrets.
func (c Config) validate() (def *endpoint, per map[string]*endpoint, keys [][]byte, err error) {
	var errs []error
	if c.Endpoint == "" && len(c.Endpoints) == 0 {
		errs = append(errs, errors.New("Endpoint or Endpoints is required"))
	}
	if c.Endpoint != "" {
		if def, err = parseEndpoint("Endpoint", c.Endpoint); err != nil {
			errs = append(errs, err)
		}
	}
	per = map[string]*endpoint{}
	for topic, raw := range c.Endpoints {
		e, err := parseEndpoint(fmt.Sprintf("Endpoints[%q]", topic), raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		per[topic] = e
	}
	for i, s := range c.Secrets {
		key, err := verify.ParseSecret(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("Secrets[%d]: %w", i, err))
			continue
		}
		keys = append(keys, key)
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %v: must not be negative", c.Timeout))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("MaxInFlight %d: must not be negative", c.MaxInFlight))
	}
	if c.MaxPayload < 0 {
		errs = append(errs, fmt.Errorf("MaxPayload %d: must not be negative", c.MaxPayload))
	}
	if strings.ContainsAny(c.ContentType, "\r\n\x00") {
		errs = append(errs, errors.New("ContentType holds a control character"))
	}
	for _, p := range c.AllowCIDRs {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("AllowCIDRs: %v is not a valid prefix", p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, nil, fmt.Errorf("webhook publisher config: %w", err)
	}
	return def, per, keys, nil
}
