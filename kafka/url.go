package kafka

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outboxgo/outbox/internal/redact"
)

// ConfigFromURL parses a kafka:// (or kafka+tls://) URL into a
// PublisherConfig:
//
//	kafka://[user:password@]host[:port][,host[:port]…][?param=value&…]
//
// A host without a port gets 9092. Every setting a URL can carry is a
// query parameter (the registered backend.Broker's Params list them, with
// their defaults); an unknown one is an error that names it, and a
// negative number or duration is refused:
//
//   - topic_prefix: PublisherConfig.TopicPrefix;
//   - client_id: PublisherConfig.ClientID;
//   - delivery_timeout: PublisherConfig.DeliveryTimeout (a Go duration,
//     "30s");
//   - dial_timeout: PublisherConfig.DialTimeout (a Go duration);
//   - max_record_bytes: PublisherConfig.MaxRecordBytes;
//   - tls: "true" to connect with TLS (system roots; the scheme
//     kafka+tls:// says the same);
//   - sasl: the SASL mechanism of the URL's user: "plain" (the default),
//     "scram-sha-256" or "scram-sha-512";
//   - key_runs: true (the default) or false (PublisherConfig.NoKeyRuns).
//
// TLS and SASL become ClientOptions. Errors name the URL with its password
// hidden.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	cfg := &PublisherConfig{}
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("kafka publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	// url.Parse refuses a host list ("b1:9092,b2:9092"): take it out first.
	hosts, rest, err := splitHosts(rawURL)
	if err != nil {
		return fail("%v", err)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return fail("not a URL")
	}
	useTLS := false
	switch u.Scheme {
	case "kafka":
	case "kafka+tls", "kafkas":
		useTLS = true
	default:
		return fail("scheme %q, want kafka or kafka+tls", u.Scheme)
	}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if !strings.Contains(h, ":") {
				h += ":9092"
			}
			cfg.Brokers = append(cfg.Brokers, h)
		}
	}
	if len(cfg.Brokers) == 0 {
		return fail("no broker")
	}
	q := u.Query()
	saslMech := ""
	for _, k := range slices.Sorted(maps.Keys(q)) { // the first bad one, always
		v := q[k][len(q[k])-1]
		switch k {
		case "topic_prefix":
			cfg.TopicPrefix = v
		case "client_id":
			cfg.ClientID = v
		case "delivery_timeout":
			d, err := duration(v)
			if err != nil {
				return fail("delivery_timeout: %v", err)
			}
			cfg.DeliveryTimeout = d
		case "dial_timeout":
			d, err := duration(v)
			if err != nil {
				return fail("dial_timeout: %v", err)
			}
			cfg.DialTimeout = d
		case "max_record_bytes":
			n, err := strconv.ParseInt(v, 10, 32)
			if err == nil && n < 0 {
				err = fmt.Errorf("%d is negative", n)
			}
			if err != nil {
				return fail("max_record_bytes: %v", err)
			}
			cfg.MaxRecordBytes = int(n)
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fail("tls: %v", err)
			}
			useTLS = useTLS || b
		case "sasl":
			saslMech = strings.ToLower(v)
		case "key_runs":
			on, err := strconv.ParseBool(v)
			if err != nil {
				return fail("key_runs %q: want true or false", v)
			}
			cfg.NoKeyRuns = !on
		default:
			return fail("unknown parameter %q", k)
		}
	}
	if useTLS {
		cfg.ClientOptions = append(cfg.ClientOptions, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		switch saslMech {
		case "", "plain":
			cfg.ClientOptions = append(cfg.ClientOptions, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "scram-sha-256":
			cfg.ClientOptions = append(cfg.ClientOptions, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "scram-sha-512":
			cfg.ClientOptions = append(cfg.ClientOptions, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return fail("sasl %q, want plain, scram-sha-256 or scram-sha-512", saslMech)
		}
	} else if saslMech != "" {
		return fail("sasl=%s needs a user in the URL", saslMech)
	}
	return cfg, nil
}

// duration parses a Go duration that is not negative.
func duration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err == nil && d < 0 {
		err = fmt.Errorf("%v is negative", d)
	}
	return d, err
}

// splitHosts returns the host list of a URL and the URL with the host list
// replaced by "h".
func splitHosts(raw string) (hosts, rest string, err error) {
	scheme, after, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", fmt.Errorf("not a URL")
	}
	end := strings.IndexAny(after, "/?#")
	if end < 0 {
		end = len(after)
	}
	authority, tail := after[:end], after[end:]
	userinfo := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, authority = authority[:at+1], authority[at+1:]
	}
	return authority, scheme + "://" + userinfo + "h" + tail, nil
}
