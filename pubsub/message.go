package pubsub

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// Attributes the Publisher sets on every Pub/Sub message, besides one
// attribute per header (the header's name and value, as they are). The
// message's data is the payload, as it is.
const (
	// AttrID is the event ID, a UUID: the consumer's dedup key.
	AttrID = "outbox-id"
	// AttrTopic is the outbox topic (the Pub/Sub topic less TopicPrefix).
	AttrTopic = "outbox-topic"
	// AttrKey is the event's key; absent when empty. With ordering on it
	// is also the message's ordering key.
	AttrKey = "outbox-key"
	// AttrType is the event's type; absent when empty.
	AttrType = "outbox-type"
	// AttrCreatedAt is when the event was enqueued, RFC 3339 with
	// nanoseconds, UTC; absent when zero.
	AttrCreatedAt = "outbox-created-at"
)

// Attributes the subscriber adds to a dead-lettered message, besides the
// original's.
const (
	// AttrError is the error that made the message dead (at most
	// MaxAttributeValueBytes).
	AttrError = "outbox-dead-error"
	// AttrDeadTopic is the ID of the topic it was consumed from.
	AttrDeadTopic = "outbox-dead-topic"
	// AttrDeadSubscription names the subscription that gave up on it.
	AttrDeadSubscription = "outbox-dead-subscription"
	// AttrDeadMessageID is the Pub/Sub message ID of the original.
	AttrDeadMessageID = "outbox-dead-message-id"
	// AttrDeadDeliveries is how many times it was delivered.
	AttrDeadDeliveries = "outbox-dead-deliveries"
)

// Pub/Sub's limits on one message ("Pub/Sub quotas and limits", resource
// limits), checked before a message is sent: a message over one fails as
// permanent, unsent.
const (
	// MaxMessageBytes bounds a message as sent: data, attributes and
	// ordering key, encoded, within the 10 MB of a publish request.
	MaxMessageBytes = gpubsub.MaxPublishRequestBytes
	// MaxAttributes is the number of attributes a message may carry,
	// the Publisher's own included (at most five).
	MaxAttributes = 100
	// MaxAttributeKeyBytes and MaxAttributeValueBytes bound each
	// attribute's name and value.
	MaxAttributeKeyBytes   = 256
	MaxAttributeValueBytes = 1024
	// MaxOrderingKeyBytes bounds the ordering key (the outbox Key, with
	// ordering on).
	MaxOrderingKeyBytes = 1024
)

// ErrTooLarge marks a message over one of Pub/Sub's limits (permanent).
var ErrTooLarge = errors.New("message over a Pub/Sub limit")

// ErrInvalid marks a message Pub/Sub cannot carry otherwise: an attribute
// name Pub/Sub reserves (goog…), text that is not UTF-8 (permanent).
var ErrInvalid = errors.New("message Pub/Sub cannot carry")

// toPubsub is m as a Pub/Sub message; ordered says whether its Key is the
// ordering key. topicName is the full topic name, counted in the request's
// size. The error wraps ErrTooLarge or ErrInvalid.
func toPubsub(m *outbox.Message, ordered bool, topicName string) (*gpubsub.Message, error) {
	attrs := make(map[string]string, len(m.Headers)+5)
	for k, v := range m.Headers {
		attrs[k] = v
	}
	attrs[AttrID] = m.ID.String()
	attrs[AttrTopic] = m.Topic
	if m.Key != "" {
		attrs[AttrKey] = m.Key
	}
	if m.Type != "" {
		attrs[AttrType] = m.Type
	}
	if !m.CreatedAt.IsZero() {
		attrs[AttrCreatedAt] = m.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	out := &gpubsub.Message{Data: m.Payload, Attributes: attrs}
	if ordered {
		out.OrderingKey = m.Key
	}
	if err := checkLimits(out, topicName); err != nil {
		return nil, err
	}
	return out, nil
}

// checkLimits reports the first of Pub/Sub's limits msg breaks.
func checkLimits(msg *gpubsub.Message, topicName string) error {
	if n := len(msg.Attributes); n > MaxAttributes {
		return fmt.Errorf("%w: %d attributes (%d headers), limit %d", ErrTooLarge, n, n-ownAttrs(msg.Attributes), MaxAttributes)
	}
	for k, v := range msg.Attributes {
		switch {
		case len(k) > MaxAttributeKeyBytes:
			return fmt.Errorf("%w: attribute name %.40q… is %d bytes, limit %d", ErrTooLarge, k, len(k), MaxAttributeKeyBytes)
		case len(v) > MaxAttributeValueBytes:
			return fmt.Errorf("%w: attribute %q is %d bytes, limit %d", ErrTooLarge, k, len(v), MaxAttributeValueBytes)
		case strings.HasPrefix(strings.ToLower(k), "goog"):
			return fmt.Errorf("%w: attribute name %q: Pub/Sub reserves names starting with goog", ErrInvalid, k)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return fmt.Errorf("%w: attribute %q: not UTF-8", ErrInvalid, k)
		}
	}
	if n := len(msg.OrderingKey); n > MaxOrderingKeyBytes {
		return fmt.Errorf("%w: key (the ordering key) is %d bytes, limit %d", ErrTooLarge, n, MaxOrderingKeyBytes)
	}
	size := proto.Size(&pb.PubsubMessage{Data: msg.Data, Attributes: msg.Attributes, OrderingKey: msg.OrderingKey})
	// The request holds the topic's name and the message's framing too.
	if limit := MaxMessageBytes - len(topicName) - 16; size > limit {
		return fmt.Errorf("%w: %d bytes with its attributes, limit %d", ErrTooLarge, size, limit)
	}
	return nil
}

// ownAttrs counts the Publisher's attributes among attrs.
func ownAttrs(attrs map[string]string) int {
	n := 0
	for _, k := range []string{AttrID, AttrTopic, AttrKey, AttrType, AttrCreatedAt} {
		if _, ok := attrs[k]; ok {
			n++
		}
	}
	return n
}

// Decode turns a Pub/Sub message written by the Publisher into an
// inbox.Message: the ID from AttrID (a UUID), the topic from AttrTopic
// (else topic, the subscription's), key, type and created-at from their
// attributes, the payload from the data, and every other attribute as a
// header. delivery is the message's delivery attempt (1 for the first).
// An error is permanent (it wraps inbox.ErrInvalidMessage): no redelivery
// can fix the message.
func Decode(m *gpubsub.Message, topic string, delivery int) (inbox.Message, error) {
	out := inbox.Message{Topic: topic, Delivery: delivery, Payload: m.Data}
	if out.Payload == nil {
		out.Payload = []byte{}
	}
	for k, v := range m.Attributes {
		switch k {
		case AttrID:
		case AttrTopic:
			out.Topic = v
		case AttrKey:
			out.Key = v
		case AttrType:
			out.Type = v
		case AttrCreatedAt:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, AttrCreatedAt, v, err)
			}
			out.CreatedAt = t
		default:
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[k] = v
		}
	}
	if out.Key == "" {
		out.Key = m.OrderingKey
	}
	raw, ok := m.Attributes[AttrID]
	if !ok {
		return out, fmt.Errorf("%w: message %s has no %s attribute", inbox.ErrInvalidMessage, m.ID, AttrID)
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, AttrID, raw)
	}
	out.ID = id
	return out, nil
}
