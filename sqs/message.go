package sqs

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/headerjson"
)

// Message attributes the Publisher sets. Every other attribute of a
// message is one of the event's headers.
const (
	// AttrID holds the event ID (String).
	AttrID = "outbox-id"
	// AttrKey holds the key, when not empty: String, or Binary when the
	// key has characters SQS refuses in a string (most control
	// characters).
	AttrKey = "outbox-key"
	// AttrType holds the type, when not empty, as AttrKey the key.
	AttrType = "outbox-type"
	// AttrCreatedAt holds the creation time, RFC 3339 with nanoseconds, UTC.
	AttrCreatedAt = "outbox-created-at"
	// AttrBodyEncoding says how the body carries the payload when it is
	// not the payload itself: "base64" for a payload that is not text SQS
	// takes (invalid UTF-8, most control characters), "empty" for an empty
	// payload (SQS refuses an empty body; the body is then BodyEmpty).
	AttrBodyEncoding = "outbox-body-encoding"
	// AttrHeaders holds, as one JSON object of strings, the headers that
	// are not attributes of their own: those beyond the 10-attribute
	// limit, those whose name SQS refuses as an attribute name, and those
	// with an empty value.
	AttrHeaders = "outbox-headers"
)

// Attributes the subscriber adds to a dead letter, besides AttrID, AttrKey,
// AttrType, AttrCreatedAt, AttrBodyEncoding and AttrHeaders (which then
// holds every header).
const (
	// AttrError is the error that made the message dead (at most 4 KiB).
	AttrError = "outbox-error"
	// AttrDeadSource is the queue the message was consumed from.
	AttrDeadSource = "outbox-dead-source"
	// AttrDeadDeliveries is how many times it was delivered (Number).
	AttrDeadDeliveries = "outbox-dead-deliveries"
)

// BodyEmpty is the body of a message whose payload is empty.
const BodyEmpty = "-"

// MaxAttributes is SQS's limit of message attributes per message.
const MaxAttributes = 10

const maxErrorAttr = 4096

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close (unavailable).
	ErrClosed = errors.New("sqs publisher closed")
	// ErrTooLarge: body and attributes exceed PublisherConfig.MaxSize
	// (permanent).
	ErrTooLarge = errors.New("message too large")
	// ErrBadQueueName: the topic maps to a name SQS does not allow for a
	// queue (permanent: no such queue can exist).
	ErrBadQueueName = errors.New("not a valid SQS queue name")
)

// validQueueName reports whether name is a name SQS allows: 1 to 80
// characters, alphanumerics, hyphens and underscores, a FIFO queue's
// ending in .fifo.
func validQueueName(name string) bool {
	base := strings.TrimSuffix(name, ".fifo")
	if base == "" || len(name) > 80 {
		return false
	}
	for _, c := range base {
		if !alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// isFIFO reports whether a queue name is a FIFO queue's.
func isFIFO(queue string) bool { return strings.HasSuffix(queue, ".fifo") }

// validText reports whether s is UTF-8 of the characters SQS takes in a
// body or a string attribute: TAB, LF, CR, U+0020–U+D7FF, U+E000–U+FFFD,
// U+10000–U+10FFFF.
func validText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		switch {
		case c == 0x9 || c == 0xA || c == 0xD:
		case c >= 0x20 && c <= 0xD7FF, c >= 0xE000 && c <= 0xFFFD, c >= 0x10000 && c <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

// validAttrName reports whether SQS takes name as a message attribute
// name: letters, digits, hyphens, underscores and periods, at most 256,
// no period first, last or twice in a row, not starting with AWS. or
// Amazon. (any case).
func validAttrName(name string) bool {
	if name == "" || len(name) > 256 || name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, "..") {
		return false
	}
	l := strings.ToLower(name)
	if strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		return false
	}
	for _, c := range name {
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// GroupID is the MessageGroupId of an event with key key on a FIFO queue
// (the topic's, for an unkeyed event): key itself when SQS takes it (1 to
// 128 characters of ASCII letters, digits and punctuation), otherwise
// "sha256-" and the hex SHA-256 of key (71 characters). The mapping is
// deterministic, so one key is always one group.
func GroupID(key string) string {
	ok := key != "" && len(key) <= 128
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= 0x21 && key[i] <= 0x7e
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// textAttr is a String attribute, or a Binary one when SQS would refuse v
// as a string.
func textAttr(v string) types.MessageAttributeValue {
	if validText(v) {
		return strAttr(v)
	}
	return types.MessageAttributeValue{DataType: aws.String("Binary"), BinaryValue: []byte(v)}
}

// attrText is the value of a String, Number or Binary attribute.
func attrText(a types.MessageAttributeValue) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	return string(a.BinaryValue)
}

// encoded is a message as it goes to SQS.
type encoded struct {
	body  string
	attrs map[string]types.MessageAttributeValue
	size  int
}

// attrSize is what SQS counts of the attributes against the message
// size: each name, data type and value.
func attrSize(attrs map[string]types.MessageAttributeValue) int {
	n := 0
	for k, a := range attrs {
		n += len(k) + len(aws.ToString(a.DataType)) + len(aws.ToString(a.StringValue)) + len(a.BinaryValue)
	}
	return n
}

// encodeBody is the body carrying payload and its AttrBodyEncoding ("" for
// none).
func encodeBody(payload []byte) (body, encoding string) {
	switch {
	case len(payload) == 0:
		return BodyEmpty, "empty"
	case validText(string(payload)):
		return string(payload), ""
	}
	return base64.StdEncoding.EncodeToString(payload), "base64"
}

// encode turns m into a body and attributes: the fixed attributes, then
// the headers, each an attribute of its own while they fit the
// 10-attribute limit (by name, in byte order), the rest in AttrHeaders.
// extra are further fixed attributes (a dead letter's).
func encode(id uuid.UUID, key, typ string, created time.Time, payload []byte, headers map[string]string,
	extra map[string]types.MessageAttributeValue, allHeadersJSON bool) (encoded, error) {
	attrs := map[string]types.MessageAttributeValue{}
	if id != uuid.Nil {
		attrs[AttrID] = strAttr(id.String())
	}
	if key != "" {
		attrs[AttrKey] = textAttr(key)
	}
	if typ != "" {
		attrs[AttrType] = textAttr(typ)
	}
	if !created.IsZero() {
		attrs[AttrCreatedAt] = strAttr(created.UTC().Format(time.RFC3339Nano))
	}
	body, enc := encodeBody(payload)
	if enc != "" {
		attrs[AttrBodyEncoding] = strAttr(enc)
	}
	for k, v := range extra {
		attrs[k] = v
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	var own, rest []string
	for _, k := range names {
		if !allHeadersJSON && validAttrName(k) && headers[k] != "" && !strings.HasPrefix(strings.ToLower(k), "outbox-") {
			own = append(own, k)
		} else {
			rest = append(rest, k)
		}
	}
	free := MaxAttributes - len(attrs)
	if len(own)+len(rest) > 0 && (len(rest) > 0 || len(own) > free) {
		free-- // one for AttrHeaders
		if free < 0 {
			free = 0
		}
		if len(own) > free {
			rest = append(rest, own[free:]...)
			own = own[:free]
		}
	}
	for _, k := range own {
		attrs[k] = textAttr(headers[k])
	}
	if len(rest) > 0 {
		m := make(map[string]string, len(rest))
		for _, k := range rest {
			m[k] = headers[k]
		}
		b, err := json.Marshal(m)
		if err != nil {
			return encoded{}, fmt.Errorf("headers: %w", err)
		}
		attrs[AttrHeaders] = strAttr(string(b))
	}
	return encoded{body: body, attrs: attrs, size: len(body) + attrSize(attrs)}, nil
}

// encodeMessage encodes an outbox message for SQS.
func encodeMessage(m *outbox.Message) (encoded, error) {
	return encode(m.ID, m.Key, m.Type, m.CreatedAt, m.Payload, m.Headers, nil, false)
}

// Decode turns an SQS message written by the Publisher (or an SNS
// publisher delivering raw messages to the queue) into an
// inbox.Message: the ID from AttrID (a UUID), key, type and creation time
// from their attributes, the payload from the body (as AttrBodyEncoding
// says), and the headers from every other attribute plus AttrHeaders's
// JSON. topic is the message's topic; delivery its delivery count. An
// error is permanent (it wraps inbox.ErrInvalidMessage): no redelivery can
// fix the message.
func Decode(topic string, body string, attrs map[string]types.MessageAttributeValue, delivery int) (inbox.Message, error) {
	out := inbox.Message{Topic: topic, Delivery: delivery}
	get := func(k string) string {
		if a, ok := attrs[k]; ok {
			return attrText(a)
		}
		return ""
	}
	out.Key, out.Type = get(AttrKey), get(AttrType)
	switch enc := get(AttrBodyEncoding); enc {
	case "":
		out.Payload = []byte(body)
	case "empty":
		out.Payload = []byte{}
	case "base64":
		p, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return out, fmt.Errorf("%w: body: %s base64: %w", inbox.ErrInvalidMessage, AttrBodyEncoding, err)
		}
		out.Payload = p
	default:
		out.Payload = []byte(body)
		return out, fmt.Errorf("%w: %s %q: want base64 or empty", inbox.ErrInvalidMessage, AttrBodyEncoding, enc)
	}
	for k, a := range attrs {
		if strings.HasPrefix(strings.ToLower(k), "outbox-") {
			continue
		}
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		out.Headers[k] = attrText(a)
	}
	if v := get(AttrHeaders); v != "" {
		var h map[string]string
		if err := headerjson.Unmarshal([]byte(v), &h); err != nil {
			return out, fmt.Errorf("%w: %s: %w", inbox.ErrInvalidMessage, AttrHeaders, err)
		}
		for k, v := range h {
			if out.Headers == nil {
				out.Headers = map[string]string{}
			}
			out.Headers[k] = v
		}
	}
	if v := get(AttrCreatedAt); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, AttrCreatedAt, v, err)
		}
		out.CreatedAt = t
	}
	raw := get(AttrID)
	if raw == "" {
		return out, fmt.Errorf("%w: the message has no %s attribute", inbox.ErrInvalidMessage, AttrID)
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, AttrID, raw)
	}
	out.ID = id
	return out, nil
}

// deadLetter encodes the dead letter of a received message: its body and
// identifying attributes, every header in AttrHeaders, and the error,
// source and delivery count.
func deadLetter(body string, attrs map[string]types.MessageAttributeValue, msg inbox.Message, source string, delivery int, cause error) encoded {
	errText := cause.Error()
	if len(errText) > maxErrorAttr {
		errText = strings.ToValidUTF8(errText[:maxErrorAttr], "")
	}
	extra := map[string]types.MessageAttributeValue{
		AttrError:          textAttr(errText),
		AttrDeadSource:     strAttr(source),
		AttrDeadDeliveries: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(delivery))},
	}
	// Keep the original body and its encoding as they were.
	out := encoded{body: body, attrs: map[string]types.MessageAttributeValue{}}
	for _, k := range []string{AttrID, AttrKey, AttrType, AttrCreatedAt, AttrBodyEncoding} {
		if a, ok := attrs[k]; ok {
			out.attrs[k] = a
		}
	}
	for k, v := range extra {
		out.attrs[k] = v
	}
	if len(msg.Headers) > 0 {
		if b, err := headerjson.Marshal(msg.Headers); err == nil {
			out.attrs[AttrHeaders] = strAttr(string(b))
		}
	} else if a, ok := attrs[AttrHeaders]; ok {
		out.attrs[AttrHeaders] = a
	}
	if out.body == "" {
		out.body = BodyEmpty
	}
	out.size = len(out.body) + attrSize(out.attrs)
	return out
}

// alnum reports whether c is an ASCII letter or digit.
func alnum(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
