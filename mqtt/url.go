package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/internal/redact"
)

// The URL parameters of ConfigFromURL.
const (
	paramTopicPrefix    = "topic_prefix"
	paramRetain         = "retain"
	paramClientID       = "client_id"
	paramKeepAlive      = "keepalive"
	paramConnectTimeout = "connect_timeout"
	paramAckTimeout     = "ack_timeout"
	paramMaxPacketSize  = "max_packet_size"
	paramCAFile         = "ca_file"
)

var paramNames = []string{paramTopicPrefix, paramRetain, paramClientID, paramKeepAlive,
	paramConnectTimeout, paramAckTimeout, paramMaxPacketSize, paramCAFile}

// ConfigFromURL parses an mqtt:// or mqtts:// URL into a
// PublisherConfig: its user information is the MQTT user name and
// password, its query parameters (topic_prefix, retain, client_id,
// keepalive, connect_timeout, ack_timeout, max_packet_size, ca_file; see
// the package documentation) set the fields of the same meaning and are
// removed from PublisherConfig.URL. Any other parameter is an error that
// names it. Errors never print the URL's password.
func ConfigFromURL(rawURL string) (*PublisherConfig, error) {
	fail := func(format string, args ...any) (*PublisherConfig, error) {
		return nil, fmt.Errorf("mqtt publisher: URL %s: %s", redact.URL(rawURL), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fail("not a URL (mqtt://user:pass@host:1883)")
	}
	if u.Scheme != "mqtt" && u.Scheme != "mqtts" {
		return fail("scheme %q, want mqtt or mqtts", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return fail("query: %s", redact.Text(err.Error()))
	}
	var unknown []string
	for k, vs := range q {
		if !slices.Contains(paramNames, k) {
			unknown = append(unknown, strconv.Quote(k))
		} else if len(vs) > 1 {
			return fail("parameter %s given %d times", k, len(vs))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fail("unknown parameter %s (the publisher reads %s)", strings.Join(unknown, ", "), strings.Join(paramNames, ", "))
	}
	cfg := &PublisherConfig{TopicPrefix: q.Get(paramTopicPrefix), ClientID: q.Get(paramClientID)}
	if v := q.Get(paramRetain); v != "" {
		if cfg.Retain, err = strconv.ParseBool(v); err != nil {
			return fail("%s %q: want true or false", paramRetain, v)
		}
	}
	for _, d := range []struct {
		name string
		to   *time.Duration
	}{{paramKeepAlive, &cfg.KeepAlive}, {paramConnectTimeout, &cfg.ConnectTimeout}, {paramAckTimeout, &cfg.AckTimeout}} {
		if v := q.Get(d.name); v != "" {
			if *d.to, err = time.ParseDuration(v); err != nil || *d.to <= 0 {
				return fail("%s %q: want a positive duration (30s, 1m)", d.name, v)
			}
		}
	}
	if v := q.Get(paramMaxPacketSize); v != "" {
		if cfg.MaxPacketSize, err = strconv.Atoi(v); err != nil || cfg.MaxPacketSize < 0 {
			return fail("%s %q: want a number of bytes, 0 or more", paramMaxPacketSize, v)
		}
	}
	if v := q.Get(paramCAFile); v != "" {
		if u.Scheme != "mqtts" {
			return fail("%s is for mqtts:// URLs", paramCAFile)
		}
		pem, err := os.ReadFile(v)
		if err != nil {
			return fail("%s: %v", paramCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fail("%s %q: no PEM certificate in it", paramCAFile, v)
		}
		cfg.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	u.RawQuery = ""
	u.ForceQuery = false
	cfg.URL = u.String()
	if _, err := parseBrokerURL(cfg.URL); err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "URL: "))
	}
	if err := cfg.WithDefaults().validate(); err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "mqtt publisher config: "))
	}
	return cfg, nil
}
