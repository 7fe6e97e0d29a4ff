package rabbitmq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// Headers the publisher sets on every message, besides the message's own.
const (
	// HeaderKey carries Message.Key, when not empty.
	HeaderKey = "Outbox-Key"
	// HeaderCreatedAt carries Message.CreatedAt in RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

// Headers the subscriber reads and sets.
const (
	// HeaderDeliveries counts the deliveries before this copy of the
	// message: the subscriber republishes a failed message with it
	// incremented. Absent on the publisher's original (delivery 1).
	HeaderDeliveries = "x-outbox-deliveries"
	// HeaderDeliveryCount is set by quorum queues on a message the broker
	// delivered again (a consumer died or requeued it); it is added to the
	// count.
	HeaderDeliveryCount = "x-delivery-count"
	// HeaderOriginalRoutingKey and HeaderOriginalExchange keep where the
	// message was first published on a republished copy (which goes to the
	// queue through the default exchange).
	HeaderOriginalRoutingKey = "x-outbox-routing-key"
	HeaderOriginalExchange   = "x-outbox-exchange"
	// HeaderError is the error that made the message dead.
	HeaderError = "Outbox-Error"
	// HeaderQueue is the queue the dead letter was consumed from.
	HeaderQueue = "Outbox-Queue"
	// HeaderRoutingKey and HeaderExchange are where it was published.
	HeaderRoutingKey = "Outbox-Routing-Key"
	HeaderExchange   = "Outbox-Exchange"
)

// maxErrorHeader bounds HeaderError's length.
const maxErrorHeader = 4096

// Deliveries is d's delivery count, 1 for the first: HeaderDeliveries + 1
// (the republishes before this copy), plus the broker's x-delivery-count
// when the queue is a quorum queue.
func Deliveries(d amqp.Delivery) int {
	n := 1 + headerInt(d.Headers[HeaderDeliveries])
	return n + headerInt(d.Headers[HeaderDeliveryCount])
}

// origin is where d was first published: its exchange and routing key, or
// those a republished copy carries.
func origin(d amqp.Delivery) (exchange, routingKey string) {
	exchange, routingKey = d.Exchange, d.RoutingKey
	if v, ok := d.Headers[HeaderOriginalRoutingKey].(string); ok {
		routingKey = v
		exchange, _ = d.Headers[HeaderOriginalExchange].(string)
	}
	return exchange, routingKey
}

func headerInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int8:
		return int(x)
	case int16:
		return int(x)
	case int32:
		return int(x)
	case int64:
		return int(x)
	case uint8:
		return int(x)
	case uint16:
		return int(x)
	case uint32:
		return int(x)
	case uint64:
		return int(x)
	case string:
		n, _ := strconv.Atoi(x)
		return n
	}
	return 0
}

// Decode turns a delivery published by a Publisher into an
// inbox.Message: the ID from MessageId (a UUID), the topic from the routing
// key it was published with (x-outbox-routing-key on a retried copy) less
// routingKeyPrefix, Type from the Type property, Key and CreatedAt
// from the Outbox-Key and Outbox-Created-At headers (CreatedAt from the
// Timestamp property when the header is missing), and the other string
// headers, less the x-* ones, as Headers. An error is permanent
// (inbox.IsPermanent).
func Decode(d amqp.Delivery, routingKeyPrefix string) (inbox.Message, error) {
	_, rk := origin(d)
	out := inbox.Message{Topic: strings.TrimPrefix(rk, routingKeyPrefix), Type: d.Type, Payload: d.Body,
		Delivery: Deliveries(d)}
	if d.MessageId == "" {
		return out, fmt.Errorf("%w: no MessageId", inbox.ErrInvalidMessage)
	}
	id, err := uuid.Parse(d.MessageId)
	if err != nil {
		return out, fmt.Errorf("%w: MessageId %q is not a UUID", inbox.ErrInvalidMessage, d.MessageId)
	}
	out.ID = id
	for k, v := range d.Headers {
		s, isString := v.(string)
		switch {
		case strings.EqualFold(k, HeaderKey):
			out.Key = s
		case strings.EqualFold(k, HeaderCreatedAt):
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return out, fmt.Errorf("%w: %s %v: %w", inbox.ErrInvalidMessage, k, v, err)
			}
			out.CreatedAt = t
		case strings.HasPrefix(strings.ToLower(k), "x-"), !isString:
		default:
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[k] = s
		}
	}
	if out.CreatedAt.IsZero() && !d.Timestamp.IsZero() {
		out.CreatedAt = d.Timestamp.UTC()
	}
	return out, nil
}

// copyOf is d as a publishing, its headers copied.
func copyOf(d amqp.Delivery) amqp.Publishing {
	h := make(amqp.Table, len(d.Headers)+6)
	for k, v := range d.Headers {
		h[k] = v
	}
	return amqp.Publishing{Headers: h, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: amqp.Persistent, Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo,
		Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId,
		AppId: d.AppId, Body: d.Body}
}

// retryMsg is d republished for its next delivery.
func retryMsg(d amqp.Delivery, delivery int) amqp.Publishing {
	p := copyOf(d)
	delete(p.Headers, HeaderDeliveryCount)
	p.Headers[HeaderDeliveries] = int32(delivery)
	p.Headers[HeaderOriginalExchange], p.Headers[HeaderOriginalRoutingKey] = origin(d)
	return p
}

// deadLetterMsg is d as a dead letter.
func deadLetterMsg(d amqp.Delivery, queue string, delivery int, cause error) amqp.Publishing {
	p := copyOf(d)
	delete(p.Headers, HeaderDeliveryCount)
	msg := strings.ToValidUTF8(cause.Error(), "")
	if len(msg) > maxErrorHeader {
		msg = strings.ToValidUTF8(msg[:maxErrorHeader], "")
	}
	p.Headers[HeaderError] = msg
	p.Headers[HeaderDeliveries] = int32(delivery)
	p.Headers[HeaderQueue] = queue
	p.Headers[HeaderExchange], p.Headers[HeaderRoutingKey] = origin(d)
	delete(p.Headers, HeaderOriginalExchange)
	delete(p.Headers, HeaderOriginalRoutingKey)
	return p
}

// publishing builds the AMQP message of m.
func publishing(m *outbox.Message) amqp.Publishing {
	h := make(amqp.Table, len(m.Headers)+2)
	for k, v := range m.Headers {
		if strings.EqualFold(k, HeaderKey) || strings.EqualFold(k, HeaderCreatedAt) {
			continue
		}
		h[k] = v
	}
	if m.Key != "" {
		h[HeaderKey] = m.Key
	}
	pub := amqp.Publishing{
		Headers:      h,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID.String(),
		Type:         m.Type,
		Body:         m.Payload,
	}
	if !m.CreatedAt.IsZero() {
		h[HeaderCreatedAt] = m.CreatedAt.UTC().Format(time.RFC3339Nano)
		pub.Timestamp = m.CreatedAt.UTC()
	}
	return pub
}
