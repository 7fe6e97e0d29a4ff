package redis

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/headerjson"
)

// Fields of every stream entry the Publisher appends, in this order.
const (
	FieldID        = "id"
	FieldKey       = "key"
	FieldType      = "type"
	FieldPayload   = "payload"
	FieldCreatedAt = "created_at"
	FieldHeaders   = "headers"
)

// Fields the subscriber adds to a dead-lettered entry, besides the
// original's.
const (
	// FieldError is the error that made the entry dead.
	FieldError = "error"
	// FieldDeadStream and FieldDeadEntryID locate the original entry.
	FieldDeadStream  = "dead_stream"
	FieldDeadEntryID = "dead_entry_id"
	// FieldDeadGroup and FieldDeadConsumer name who gave up on it.
	FieldDeadGroup    = "dead_group"
	FieldDeadConsumer = "dead_consumer"
	// FieldDeadDeliveries is how many times it was delivered.
	FieldDeadDeliveries = "dead_deliveries"
)

// maxErrorField bounds FieldError's length.
const maxErrorField = 4096

// headersField is the FieldHeaders value of m's entry.
func headersField(m *outbox.Message) (string, error) {
	if len(m.Headers) == 0 {
		return "{}", nil
	}
	b, err := headerjson.Marshal(m.Headers)
	return string(b), err
}

// values are the fields of m's entry, in order; headers is its
// headersField.
func values(m *outbox.Message, headers string) []any {
	created := ""
	if !m.CreatedAt.IsZero() {
		created = m.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	payload := m.Payload
	if payload == nil {
		payload = []byte{}
	}
	return []any{
		FieldID, m.ID.String(),
		FieldKey, m.Key,
		FieldType, m.Type,
		FieldPayload, payload,
		FieldCreatedAt, created,
		FieldHeaders, headers,
	}
}

// Decode turns a stream entry written by the Publisher into an
// inbox.Message: the ID from the id field (a UUID), the topic from the
// stream's name less streamPrefix, key, type, payload and created_at from
// their fields, and Headers from the headers field's JSON object. delivery
// is the entry's delivery count. An error is permanent (inbox.IsPermanent):
// no redelivery can fix the entry.
func Decode(stream string, e goredis.XMessage, streamPrefix string, delivery int) (inbox.Message, error) {
	str := func(k string) string {
		switch v := e.Values[k].(type) {
		case string:
			return v
		case []byte:
			return string(v)
		case nil:
			return ""
		default:
			return fmt.Sprint(v)
		}
	}
	out := inbox.Message{Topic: strings.TrimPrefix(stream, streamPrefix), Delivery: delivery,
		Key: str(FieldKey), Type: str(FieldType), Payload: []byte(str(FieldPayload))}
	raw := str(FieldID)
	if raw == "" {
		return out, fmt.Errorf("%w: entry %s has no %s field", inbox.ErrInvalidMessage, e.ID, FieldID)
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, FieldID, raw)
	}
	out.ID = id
	if v := str(FieldCreatedAt); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, FieldCreatedAt, v, err)
		}
		out.CreatedAt = t
	}
	if v := str(FieldHeaders); v != "" && v != "{}" {
		if err := headerjson.Unmarshal([]byte(v), &out.Headers); err != nil {
			return out, fmt.Errorf("%w: %s: %w", inbox.ErrInvalidMessage, FieldHeaders, err)
		}
		if len(out.Headers) == 0 {
			out.Headers = nil
		}
	}
	return out, nil
}

// deadLetterValues are the fields of the dead-letter entry for e.
func deadLetterValues(stream string, e goredis.XMessage, group, consumer string, delivery int, cause error) []any {
	vals := make([]any, 0, 2*len(e.Values)+12)
	for k, v := range e.Values {
		switch k {
		case FieldError, FieldDeadStream, FieldDeadEntryID, FieldDeadGroup, FieldDeadConsumer, FieldDeadDeliveries:
			continue
		}
		vals = append(vals, k, v)
	}
	msg := cause.Error()
	if len(msg) > maxErrorField {
		msg = strings.ToValidUTF8(msg[:maxErrorField], "")
	}
	return append(vals, FieldError, msg, FieldDeadStream, stream, FieldDeadEntryID, e.ID,
		FieldDeadGroup, group, FieldDeadConsumer, consumer, FieldDeadDeliveries, delivery)
}
