package kafka

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/inbox"
)

// maxErrorHeader bounds HeaderError's length.
const maxErrorHeader = 4096

// Decode turns a record produced by a Publisher into an
// inbox.Message: the ID from the Outbox-Id header (a UUID), the topic from
// the record's topic less topicPrefix, Key from the record key, Type and
// CreatedAt from the Outbox-Type and Outbox-Created-At headers, and the
// other headers (the last value of each) as Headers. delivery is the
// delivery count. An error is permanent (inbox.IsPermanent).
func Decode(r *kgo.Record, topicPrefix string, delivery int) (inbox.Message, error) {
	out := inbox.Message{Topic: strings.TrimPrefix(r.Topic, topicPrefix), Key: string(r.Key), Payload: r.Value,
		Delivery: delivery}
	var rawID string
	for _, h := range r.Headers {
		switch {
		case strings.EqualFold(h.Key, HeaderID):
			rawID = string(h.Value)
		case strings.EqualFold(h.Key, HeaderType):
			out.Type = string(h.Value)
		case strings.EqualFold(h.Key, HeaderCreatedAt):
			t, err := time.Parse(time.RFC3339Nano, string(h.Value))
			if err != nil {
				return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, h.Key, h.Value, err)
			}
			out.CreatedAt = t
		default:
			if out.Headers == nil {
				out.Headers = make(map[string]string, len(r.Headers))
			}
			out.Headers[h.Key] = string(h.Value)
		}
	}
	if rawID == "" {
		return out, fmt.Errorf("%w: no %s header", inbox.ErrInvalidMessage, HeaderID)
	}
	id, err := uuid.Parse(rawID)
	if err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, HeaderID, rawID)
	}
	out.ID = id
	return out, nil
}

// deadLetterRecord is r as a dead letter on topic.
func deadLetterRecord(topic string, r *kgo.Record, group string, delivery int, cause error) *kgo.Record {
	msg := strings.ToValidUTF8(cause.Error(), "")
	if len(msg) > maxErrorHeader {
		msg = strings.ToValidUTF8(msg[:maxErrorHeader], "")
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+6)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderError, HeaderDeliveries, HeaderTopic, HeaderPartition, HeaderOffset, HeaderGroup:
			continue
		}
		hs = append(hs, h)
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderDeliveries, Value: []byte(strconv.Itoa(delivery))},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: HeaderOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: HeaderGroup, Value: []byte(group)})
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs}
}
