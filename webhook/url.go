package webhook

import (
	"fmt"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// The URL schemes: the endpoint's own, after "webhook+".
const (
	SchemeHTTPS = "webhook+https"
	SchemeHTTP  = "webhook+http"
)

// URL parameters.
const (
	paramSecret       = "secret"
	paramTimeout      = "timeout"
	paramMaxInFlight  = "max_in_flight"
	paramMaxPayload   = "max_payload"
	paramContentType  = "content_type"
	paramAllowPrivate = "allow_private"
	paramAllowCIDR    = "allow_cidr"
)

var paramNames = []string{paramSecret, paramTimeout, paramMaxInFlight, paramMaxPayload, paramContentType, paramAllowPrivate, paramAllowCIDR}

// ConfigFromURL parses a webhook+https:// or webhook+http:// URL into a
// Config: the URL less "webhook+" and its query is Config.Endpoint
// ({topic} in its path included, user-info for Basic authentication), and
// the query parameters set the other fields (see the package
// documentation); secret and allow_cidr may repeat, or hold
// comma-separated lists. Any other parameter is an error that names it:
// the URL form has no query of the endpoint's own (Config.Endpoint takes
// one). Errors are classified publishers.Misconfigured and never show a
// secret.
func ConfigFromURL(rawURL string) (*Config, error) {
	fail := func(format string, args ...any) (*Config, error) {
		return nil, publishers.Misconfigured(fmt.Errorf("webhook publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...)))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != SchemeHTTPS && scheme != SchemeHTTP {
		return fail("scheme %q, want %s or %s", u.Scheme, SchemeHTTPS, SchemeHTTP)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("the query does not parse")
	}
	var unknown []string
	for k := range q {
		known := false
		for _, n := range paramNames {
			known = known || k == n
		}
		if !known {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fail("unknown parameter %s (the publisher reads %s)", strings.Join(unknown, ", "), strings.Join(paramNames, ", "))
	}
	cfg := &Config{}
	list := func(name string) []string {
		var out []string
		for _, v := range q[name] {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
		}
		return out
	}
	// A "+" of base64 left unescaped in the query reads as a space, which
	// base64 never holds: it is a "+".
	for _, v := range q[paramSecret] {
		for _, s := range strings.Split(strings.ReplaceAll(v, " ", "+"), ",") {
			if s != "" {
				cfg.Secrets = append(cfg.Secrets, s)
			}
		}
	}
	if v := q.Get(paramTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fail("%s %q: want a positive duration (15s, 1m)", paramTimeout, v)
		}
		cfg.Timeout = d
	}
	for _, f := range []struct {
		name string
		dst  *int
		min  int
	}{{paramMaxInFlight, &cfg.MaxInFlight, 1}, {paramMaxPayload, &cfg.MaxPayload, 0}} {
		if v := q.Get(f.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < f.min {
				return fail("%s %q: want a whole number, %d or more", f.name, v, f.min)
			}
			*f.dst = n
		}
	}
	cfg.ContentType = q.Get(paramContentType)
	if v := q.Get(paramAllowPrivate); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s %q: want true or false", paramAllowPrivate, v)
		}
		cfg.AllowPrivate = b
	}
	for _, s := range list(paramAllowCIDR) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return fail("%s %q: want a CIDR prefix (10.0.0.0/8) or an address", paramAllowCIDR, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		cfg.AllowCIDRs = append(cfg.AllowCIDRs, p.Masked())
	}
	e := *u
	e.Scheme = strings.TrimPrefix(scheme, "webhook+")
	e.RawQuery, e.ForceQuery = "", false
	cfg.Endpoint = e.String()
	if _, err := parseEndpoint("endpoint", cfg.Endpoint); err != nil {
		return fail("%v", strings.TrimPrefix(err.Error(), "endpoint "+redact.URL(cfg.Endpoint)+": "))
	}
	return cfg, nil
}
