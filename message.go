package outbox

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Message is one event recorded in the outbox.
//
// Only Topic is required. Enqueue fills ID (a UUIDv7) and CreatedAt (from the
// injected Clock) when they are zero.
type Message struct {
	// ID identifies the event everywhere downstream: it is the broker's dedup
	// key (Nats-Msg-Id, AMQP message-id, …) and the inbox's. Zero means "make
	// one": Enqueue sets a new UUIDv7. Set it yourself (NewID) when the
	// caller needs to know it.
	ID uuid.UUID
	// Topic names the destination; publishers map it to a subject, a Kafka
	// topic, an exchange and routing key. Required.
	Topic string
	// Key is the ordering key: events with the same key are published in
	// the order their transactions committed. Empty means unordered.
	Key string
	// Type names the kind of event ("OrderConfirmed"). Optional.
	Type string
	// Payload is the event body, opaque to the outbox.
	Payload []byte
	// Headers are carried to the broker as message headers (correlation
	// id, trace context). Names are tokens outside ReservedHeaderPrefixes;
	// values have no control characters but TAB and no leading or
	// trailing whitespace (see validate for why).
	Headers map[string]string
	// CreatedAt is when the event was enqueued. Zero means "now" per the
	// Outbox's clock.
	CreatedAt time.Time
	// NotBefore delays delivery: the relay does not publish the event
	// before this time. Zero means "as soon as possible".
	NotBefore time.Time
}

// Limits that apply to every store, so that a message valid for one is valid
// for all.
const (
	MaxTopicLen = 255 // bytes
	MaxKeyLen   = 255 // bytes
	MaxTypeLen  = 255 // bytes
)

// NewID returns a new UUIDv7: time-ordered, so ids inserted together sit
// together in the index.
func NewID() uuid.UUID {
	return uuid.Must(uuid.NewV7())
}

// ReservedHeaderPrefixes are the header-name prefixes the outbox and the
// brokers' clients give meaning to (Outbox-Key, Outbox-Type, x-outbox-…,
// JetStream's Nats-Msg-Id and Nats-Expected-…). Enqueue refuses a header
// whose name starts with one, in any case: a consumer must be able to trust
// that an Outbox-Key header was set by the outbox.
var ReservedHeaderPrefixes = []string{"outbox-", "x-outbox-", "nats-"}

// validate checks what every store and publisher relies on: one rule for
// all of them, so that a message valid for one is valid for all.
//
// Topic, key and type are any valid UTF-8 without NUL (PostgreSQL's text
// cannot hold NUL; the other stores could, so none does). Header names are
// RFC 9110 tokens (ASCII letters, digits and !#$%&'*+-.^_`|~, as NATS and
// HTTP-style headers require) outside ReservedHeaderPrefixes; header values
// are RFC 9110 field values: no control characters but TAB, and no leading
// or trailing space or TAB (header-based brokers trim them).
func (m *Message) validate() error {
	if err := checkField("topic", m.Topic, MaxTopicLen); err != nil {
		return err
	}
	if m.Topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalidMessage)
	}
	if err := checkField("key", m.Key, MaxKeyLen); err != nil {
		return err
	}
	if err := checkField("type", m.Type, MaxTypeLen); err != nil {
		return err
	}
	for k, v := range m.Headers {
		if err := checkHeader(k, v); err != nil {
			return fmt.Errorf("%w: header %q: %s", ErrInvalidMessage, k, err)
		}
	}
	return nil
}

// checkField checks a topic, key or type.
func checkField(what, s string, limit int) error {
	switch {
	case len(s) > limit:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrInvalidMessage, what, len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidMessage, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s holds a NUL byte", ErrInvalidMessage, what)
	}
	return nil
}

// isTokenChar reports whether r is an RFC 9110 tchar.
func isTokenChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return true
	}
	return strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}

// checkHeader checks one header; the error says why, without the value.
func checkHeader(k, v string) error {
	switch {
	case k == "":
		return errors.New("empty name")
	case !utf8.ValidString(k) || !utf8.ValidString(v):
		return errors.New("not valid UTF-8")
	case strings.ContainsFunc(k, func(r rune) bool { return !isTokenChar(r) }):
		return errors.New("a name holds a character outside RFC 9110's token (letters, digits and !#$%&'*+-.^_`|~): a space, a control character, ':', non-ASCII, …")
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }):
		return errors.New("the value holds a control character (CR, LF, NUL, …)")
	case strings.TrimLeft(v, " \t") != v || strings.TrimRight(v, " \t") != v:
		return errors.New("the value begins or ends with a space or TAB (header-based brokers trim it)")
	}
	lower := strings.ToLower(k)
	for _, p := range ReservedHeaderPrefixes {
		if strings.HasPrefix(lower, p) {
			return fmt.Errorf("names starting with %q are reserved for the outbox and the brokers", p)
		}
	}
	return nil
}
