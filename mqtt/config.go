package mqtt

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"
)

// PublisherConfig configures a Publisher. Zero means the default, for
// every field: the zero value publishes topic T to the MQTT topic T on the
// broker at mqtt://127.0.0.1:1883, anonymously.
type PublisherConfig struct {
	// URL is the broker: mqtt://[user[:password]@]host[:port] (port 1883
	// by default) or mqtts://… for TLS (port 8883 by default). The user
	// and password go in the CONNECT packet. Query parameters are
	// ConfigFromURL's business: NewPublisher refuses a URL that still has
	// any. Default DefaultURL.
	URL string

	// TopicPrefix, when set, puts every message on the MQTT topic
	// TopicPrefix + topic (no separator is added: say "events/" for one
	// level). Default "".
	TopicPrefix string
	// Topic maps a topic to an MQTT topic name, overriding TopicPrefix.
	// Default nil.
	Topic func(topic string) string
	// Retain publishes every message with the RETAIN flag: the broker
	// keeps the last message of each topic and hands it to every new
	// subscriber. Default false: an event is delivered once, to the
	// subscriptions that exist when it arrives.
	Retain bool

	// ClientID is the MQTT client identifier of the publisher's
	// connections. Two connections with one client ID take each other's
	// place at the broker, so give each relay instance its own. Default:
	// "outbox-pub-" and 16 random hex digits, new for each Publisher.
	ClientID string
	// KeepAlive is the MQTT keep-alive: a PINGREQ goes out when nothing
	// else was sent for this long, and the connection is dropped when the
	// broker stays silent. At least 1 s, at most 65535 s. Default
	// DefaultKeepAlive (30 s).
	KeepAlive time.Duration
	// ConnectTimeout bounds the TCP (and TLS) dial and the wait for the
	// CONNACK, within Publish's own context. Default DefaultConnectTimeout
	// (10 s).
	ConnectTimeout time.Duration
	// AckTimeout bounds the wait for a PUBACK when Publish's context has
	// no earlier deadline. Default DefaultAckTimeout (30 s).
	AckTimeout time.Duration
	// MaxPacketSize, when positive, caps the size of the PUBLISH packets
	// the publisher sends (payload, topic and properties): a larger
	// message fails as permanent, unsent. The broker's own Maximum Packet
	// Size from the CONNACK applies either way (a packet over it makes
	// the broker drop the connection). Default 0: the broker's limit, or
	// MQTT's own (256 MiB) when the broker sets none.
	MaxPacketSize int

	// TLSConfig is the TLS configuration of an mqtts:// URL. Default: the
	// system's roots and the URL's host as ServerName (ConfigFromURL's
	// ca_file parameter adds a CA file).
	TLSConfig *tls.Config

	// Logger receives the publisher's logs. Default: discarded.
	Logger *slog.Logger
}

// Defaults of PublisherConfig.
const (
	DefaultURL            = "mqtt://127.0.0.1:1883"
	DefaultKeepAlive      = 30 * time.Second
	DefaultConnectTimeout = 10 * time.Second
	DefaultAckTimeout     = 30 * time.Second
)

// Limits of MQTT 5 that the publisher enforces.
const (
	// MaxTopicLen is the longest MQTT topic name, in bytes of UTF-8.
	MaxTopicLen = 65535
	// MaxPacket is the largest packet MQTT can frame: a fixed header of
	// 5 bytes and a remaining length of at most 268,435,455 bytes.
	MaxPacket = 5 + 268435455
)

// WithDefaults returns a copy of c with every zero field set to its
// default.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.ClientID == "" {
		c.ClientID = randomID("outbox-pub-")
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate reports what c (with its defaults) cannot run with, each field
// by name.
func (c PublisherConfig) validate() error {
	var errs []error
	if _, err := parseBrokerURL(c.URL); err != nil {
		errs = append(errs, err)
	}
	if err := checkTopicName(c.TopicPrefix); err != nil && c.TopicPrefix != "" {
		errs = append(errs, fmt.Errorf("TopicPrefix %q: %w", c.TopicPrefix, err))
	}
	if c.ClientID != "" && !safeString(c.ClientID) {
		errs = append(errs, fmt.Errorf("ClientID %q: %s", c.ClientID, errUnsafeText))
	}
	if c.KeepAlive < time.Second || c.KeepAlive > 65535*time.Second {
		errs = append(errs, fmt.Errorf("KeepAlive %v: want 1s to 65535s", c.KeepAlive))
	}
	if c.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("ConnectTimeout %v: must not be negative", c.ConnectTimeout))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("AckTimeout %v: must not be negative", c.AckTimeout))
	}
	if c.MaxPacketSize < 0 {
		errs = append(errs, fmt.Errorf("MaxPacketSize %d: must not be negative", c.MaxPacketSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mqtt publisher config: %w", err)
	}
	return nil
}

// brokerURL is a parsed PublisherConfig.URL.
type brokerURL struct {
	tls      bool
	addr     string // host:port
	host     string
	user     string
	hasUser  bool
	password string
	hasPass  bool
}

// parseBrokerURL parses a URL without query parameters; errors never
// show the password.
func parseBrokerURL(raw string) (*brokerURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("URL: not a URL (mqtt://user:pass@host:1883)")
	}
	b := &brokerURL{}
	switch u.Scheme {
	case "mqtt", "tcp":
	case "mqtts", "ssl", "tls":
		b.tls = true
	default:
		return nil, fmt.Errorf("URL: scheme %q, want mqtt or mqtts", u.Scheme)
	}
	if u.RawQuery != "" {
		return nil, errors.New("URL: has query parameters (ConfigFromURL reads them)")
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("URL: path %q: MQTT URLs have none", u.Path)
	}
	b.host = u.Hostname()
	if b.host == "" {
		return nil, errors.New("URL: no host")
	}
	port := u.Port()
	if port == "" {
		port = "1883"
		if b.tls {
			port = "8883"
		}
	}
	b.addr = net.JoinHostPort(b.host, port)
	if u.User != nil {
		b.user, b.hasUser = u.User.Username(), true
		b.password, b.hasPass = u.User.Password()
	}
	return b, nil
}

// randomID is prefix and 16 random hex digits.
func randomID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
