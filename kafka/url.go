package kafka

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outboxgo/outbox/internal/redact"
)

// ConfigFromURL parses a kafka:// (or kafka+tls://) URL into a Config; see
// the package documentation for the query parameters.
func ConfigFromURL(rawURL string) (Config, error) {
	var cfg Config
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("kafka publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
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
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "topic_prefix":
			cfg.TopicPrefix = v
		case "client_id":
			cfg.ClientID = v
		case "delivery_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fail("delivery_timeout: %v", err)
			}
			cfg.DeliveryTimeout = d
		case "max_record_bytes":
			n, err := strconv.Atoi(v)
			if err != nil {
				return fail("max_record_bytes: %v", err)
			}
			cfg.MaxRecordBytes = n
		case "tls":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fail("tls: %v", err)
			}
			useTLS = useTLS || b
		case "sasl":
			saslMech = strings.ToLower(v)
		default:
			return fail("unknown parameter %q", k)
		}
	}
	if useTLS {
		cfg.Options = append(cfg.Options, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if u.User != nil {
		user := u.User.Username()
		pass, _ := u.User.Password()
		switch saslMech {
		case "", "plain":
			cfg.Options = append(cfg.Options, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
		case "scram-sha-256":
			cfg.Options = append(cfg.Options, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		case "scram-sha-512":
			cfg.Options = append(cfg.Options, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
		default:
			return fail("sasl %q, want plain, scram-sha-256 or scram-sha-512", saslMech)
		}
	} else if saslMech != "" {
		return fail("sasl=%s needs a user in the URL", saslMech)
	}
	return cfg, nil
}

// NewFromURL returns a Publisher configured by a kafka:// URL, for a CLI
// that picks the publisher by scheme.
func NewFromURL(rawURL string) (*Publisher, error) {
	cfg, err := ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	return New(cfg)
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
