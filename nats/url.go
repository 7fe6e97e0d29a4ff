package nats

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
)

// urlParams are the query parameters ConfigFromURL reads, with their
// defaults.
var urlParams = []backend.Param{
	{Name: "subject_prefix", Default: DefaultSubjectPrefix, Usage: "publish topic T on subject PREFIX.T (empty: on subject T, without stream)", Flag: true},
	{Name: "stream", Default: "", Usage: "create (or extend) this JetStream stream to capture PREFIX.>", Flag: true},
	{Name: "name", Default: DefaultName, Usage: "the connection name the server shows"},
	{Name: "max_pending", Default: strconv.Itoa(DefaultMaxPending), Usage: "publishes that may await their acknowledgement at once"},
	{Name: "ack_timeout", Default: DefaultAckTimeout.String(), Usage: "how long a publish waits for its acknowledgement"},
	{Name: "connect_timeout", Default: DefaultConnectTimeout.String(), Usage: "how long the first connection attempt may take"},
	{Name: "reconnect_wait", Default: DefaultReconnectWait.String(), Usage: "the pause between reconnection attempts (forever)"},
	{Name: "atomic_key_runs", Default: "false", Usage: "send each key's run of events as one atomic batch where JetStream can (nats-server 2.12.1+, AllowAtomicPublish)"},
	{Name: "fast_key_runs", Default: "auto", Usage: "send a batch's events to each stream as one fast-ingest batch, keeping key order (nats-server 2.14+, AllowBatchPublish): auto where JetStream can, true warns where it cannot, false never; not true with atomic_key_runs"},
	{Name: "token", Default: "", Usage: "the authentication token, for a URL without one (never printed)"},
}

// ConfigFromURL parses a nats:// URL, or a comma-separated list of them,
// into a PublisherConfig:
//
//	nats://[token@ | user:password@]host[:port][,nats://…][?param=value&…]
//
// The URL (its query taken out) becomes PublisherConfig.URL, credentials
// included. Every setting a URL can carry is a query parameter, on any
// URL of a list; an unknown one, or one given twice with different
// values, is an error that names it:
//
//   - subject_prefix: PublisherConfig.SubjectPrefix (default "outbox";
//     given empty, NoSubjectPrefix: topic T goes on subject T);
//   - stream: PublisherConfig.Stream, the stream capturing PREFIX.>;
//   - name: PublisherConfig.Name;
//   - max_pending: PublisherConfig.MaxPending;
//   - ack_timeout, connect_timeout, reconnect_wait: PublisherConfig's
//     AckTimeout, ConnectTimeout, ReconnectWait (Go durations, "30s");
//   - atomic_key_runs: PublisherConfig.AtomicKeyRuns (true or false);
//   - fast_key_runs: auto (the default: fast-ingest batches wherever
//     JetStream can take them), true (PublisherConfig.FastKeyRuns) or
//     false (NoKeyRuns, unless atomic_key_runs=true); not true with
//     atomic_key_runs=true;
//   - token: the authentication token (nats.Token), for servers that
//     take one, when the URL's user-info does not carry it.
//
// Errors name the URL with its credentials hidden, and never show a
// token or password.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("nats publisher: URL %s: %s", redactList(rawURL), fmt.Sprintf(format, args...))
	}
	var servers []string
	params := url.Values{}
	for _, el := range strings.Split(rawURL, ",") {
		el = strings.TrimSpace(el)
		if el == "" {
			return fail("an empty URL in the list")
		}
		full := el
		if !strings.Contains(el, "://") {
			full = "nats://" + el // nats.go's reading of host:port in a list
		}
		u, err := url.Parse(full)
		if err != nil {
			return fail("not a URL")
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fail("scheme %q, want nats (or tls, ws, wss in a list)", u.Scheme)
		}
		if u.Host == "" {
			return fail("no host")
		}
		if u.Fragment != "" || (u.Path != "" && u.Path != "/") || u.Opaque != "" {
			return fail("a NATS URL has no path or fragment")
		}
		for k, vs := range u.Query() {
			for _, v := range vs {
				if have, ok := params[k]; ok && have[0] != v {
					if redact.SecretKey(k) {
						return fail("parameter %q given twice, with different values", k)
					}
					return fail("parameter %q given twice: %q and %q", k, have[0], v)
				}
				params[k] = []string{v}
			}
		}
		server, _, _ := strings.Cut(el, "?")
		servers = append(servers, server)
	}
	cfg := &PublisherConfig{URL: strings.Join(servers, ",")}
	for _, k := range slices.Sorted(maps.Keys(params)) { // the first bad one, always
		v := params[k][0]
		var err error
		switch k {
		case "subject_prefix":
			cfg.SubjectPrefix = v
			if v == "" {
				cfg.SubjectPrefix = NoSubjectPrefix
			} else if err = checkSubject(v+".x", false); err != nil {
				err = fmt.Errorf("%q: want dot-separated tokens without spaces, * or > (outbox, app.events)", v)
			}
		case "stream":
			cfg.Stream = v
			err = checkStreamName(v)
		case "name":
			cfg.Name = v
		case "max_pending":
			cfg.MaxPending, err = strconv.Atoi(v)
			if err == nil && cfg.MaxPending < 0 {
				err = fmt.Errorf("%d is negative", cfg.MaxPending)
			}
		case "ack_timeout":
			cfg.AckTimeout, err = duration(v)
		case "connect_timeout":
			cfg.ConnectTimeout, err = duration(v)
		case "reconnect_wait":
			cfg.ReconnectWait, err = duration(v)
		case "atomic_key_runs":
			cfg.AtomicKeyRuns, err = strconv.ParseBool(v)
		case "fast_key_runs":
			if v != "auto" {
				var on bool
				if on, err = strconv.ParseBool(v); err != nil {
					err = fmt.Errorf("%q: want auto, true or false", v)
				}
				cfg.FastKeyRuns, cfg.NoKeyRuns = on, err == nil && !on
			}
		case "token":
			if v == "" {
				err = fmt.Errorf("empty")
			}
			cfg.Options = append(cfg.Options, nats.Token(v))
		default:
			return fail("unknown parameter %q (known: %s)", k, paramNames())
		}
		if err != nil {
			return fail("%s: %v", k, err)
		}
	}
	if cfg.AtomicKeyRuns {
		cfg.NoKeyRuns = false // fast_key_runs=false: atomic batches, not fast ones
	}
	if cfg.Stream != "" && cfg.SubjectPrefix == NoSubjectPrefix {
		return fail("subject_prefix is empty, so the stream would capture every subject (>), which NATS refuses or overlaps with every other stream: give a prefix (default %s)",
			DefaultSubjectPrefix)
	}
	if err := cfg.validate(); err != nil {
		return fail("%v", err)
	}
	return cfg, nil
}

// redactList is rawURL with its secrets hidden, URL by URL: redact.URL
// misses some in a list whose URLs lack their scheme.
func redactList(rawURL string) string {
	els := strings.Split(rawURL, ",")
	for i, el := range els {
		els[i] = redact.URL(el)
	}
	return strings.Join(els, ",")
}

// duration parses a Go duration that is not negative.
func duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("%v is negative", d)
	}
	return d, err
}

// paramNames lists the parameters ConfigFromURL knows.
func paramNames() string {
	names := make([]string, len(urlParams))
	for i, p := range urlParams {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
