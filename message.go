package outbox

import (
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
	// id, trace context). Names must be non-empty; names and values valid
	// UTF-8 without CR or LF (no broker carries those in a header).
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

// validate checks what every store and publisher relies on.
func (m *Message) validate() error {
	switch {
	case m.Topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalidMessage)
	case len(m.Topic) > MaxTopicLen:
		return fmt.Errorf("%w: topic is %d bytes, limit %d", ErrInvalidMessage, len(m.Topic), MaxTopicLen)
	case !utf8.ValidString(m.Topic):
		return fmt.Errorf("%w: topic is not valid UTF-8", ErrInvalidMessage)
	case len(m.Key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, limit %d", ErrInvalidMessage, len(m.Key), MaxKeyLen)
	case !utf8.ValidString(m.Key):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidMessage)
	case len(m.Type) > MaxTypeLen:
		return fmt.Errorf("%w: type is %d bytes, limit %d", ErrInvalidMessage, len(m.Type), MaxTypeLen)
	case !utf8.ValidString(m.Type):
		return fmt.Errorf("%w: type is not valid UTF-8", ErrInvalidMessage)
	}
	for k, v := range m.Headers {
		if k == "" || !utf8.ValidString(k) || !utf8.ValidString(v) || strings.ContainsAny(k+v, "\r\n") {
			return fmt.Errorf("%w: header %q: names must be non-empty, names and values valid UTF-8 without CR or LF", ErrInvalidMessage, k)
		}
	}
	return nil
}
