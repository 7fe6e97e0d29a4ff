package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// maxShortstr is the longest AMQP 0-9-1 short string, in bytes: routing
// keys, header (field table) names, the type property.
const maxShortstr = 255

// routingHeaders are the headers RabbitMQ reads as sender-selected
// distribution: their values are more routing keys to deliver the message
// with (CC) or without telling the consumers (BCC, removed before
// delivery). RabbitMQ matches the names exactly.
var routingHeaders = []string{"CC", "BCC"}

// refuseLocally is the permanent error of a message the publisher never
// sends (see the package documentation), nil for one it sends. Every path
// that publishes — a batch, and one message alone — checks it first.
func (p *Publisher) refuseLocally(m *outbox.Message) error {
	if len(m.Payload) > p.cfg.MaxMessageSize {
		return publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %d bytes, limit %d", m.ID, ErrTooLarge, len(m.Payload), p.cfg.MaxMessageSize))
	}
	if err := p.representable(m); err != nil {
		return publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %w", m.ID, ErrNotRepresentable, err))
	}
	for _, h := range routingHeaders {
		if _, ok := m.Headers[h]; ok {
			return publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: header %q is RabbitMQ's sender-selected distribution, which would route the message with its value as more routing keys", m.ID, ErrReservedHeader, h))
		}
	}
	return nil
}

// representable checks the short strings of m's publishing, which
// amqp091 cannot encode over 255 bytes: it fails the write and closes the
// connection, failing every message in flight.
func (p *Publisher) representable(m *outbox.Message) error {
	if rk := p.routingKey(m.Topic); len(rk) > maxShortstr {
		return fmt.Errorf("routing key %s is %d bytes, limit %d", clip(rk), len(rk), maxShortstr)
	}
	if len(m.Type) > maxShortstr {
		return fmt.Errorf("type %s is %d bytes, limit %d", clip(m.Type), len(m.Type), maxShortstr)
	}
	for k := range m.Headers {
		if len(k) > maxShortstr {
			return fmt.Errorf("header name %s is %d bytes, limit %d", clip(k), len(k), maxShortstr)
		}
	}
	return nil
}

// clip quotes the start of a long string for an error.
func clip(s string) string {
	if len(s) > 40 {
		return strconv.Quote(strings.ToValidUTF8(s[:40], "")) + "…"
	}
	return strconv.Quote(s)
}
