package mqtt

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/paho"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// Names of the MQTT 5 user properties every message carries. A header H
// of the message is the user property H, after these.
const (
	// PropID is the event ID: the consumer's dedup key.
	PropID = "outbox-id"
	// PropKey is Message.Key; absent when the key is empty.
	PropKey = "outbox-key"
	// PropType is Message.Type; absent when the type is empty.
	PropType = "outbox-type"
	// PropCreatedAt is Message.CreatedAt in RFC 3339 with nanoseconds;
	// absent when zero.
	PropCreatedAt = "outbox-created-at"
	// PrefixBase64 starts the name of a property whose value is a key,
	// type or header value that MQTT cannot carry as text (a control
	// character, U+007F–U+009F or a Unicode non-character, which MQTT 5
	// section 1.5.4 lets a receiver treat as malformed and Mosquitto
	// does): the property PrefixBase64+name holds the value in standard
	// base64 instead of the property name ("outbox-b64-outbox-key",
	// "outbox-b64-my-header").
	PrefixBase64 = "outbox-b64-"
)

// errUnsafeText says why a string cannot travel as MQTT text.
var errUnsafeText = errors.New("holds a character MQTT 5 lets a broker treat as malformed (NUL, a control character, U+007F–U+009F, a Unicode non-character) or is not UTF-8")

// safeString reports whether s can travel as an MQTT UTF-8 string that
// every broker takes: valid UTF-8 with none of the code points of MQTT 5
// section 1.5.4 (U+0000–U+001F, U+007F–U+009F, the non-characters
// U+FDD0–U+FDEF and U+xFFFE, U+xFFFF) — what Mosquitto rejects by closing
// the connection — and at most 65535 bytes.
func safeString(s string) bool {
	if len(s) > maxString || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r <= 0x1f, r >= 0x7f && r <= 0x9f,
			r >= 0xfdd0 && r <= 0xfdef, r&0xfffe == 0xfffe:
			return false
		}
	}
	return true
}

// checkTopicName reports why name cannot be an MQTT topic name to publish
// to: empty, longer than MaxTopicLen, a wildcard ('+' or '#') or a
// character MQTT lets a broker treat as malformed.
func checkTopicName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > MaxTopicLen:
		return fmt.Errorf("%d bytes, MQTT's limit is %d", len(name), MaxTopicLen)
	case strings.ContainsAny(name, "+#"):
		return errors.New("holds a wildcard ('+' or '#'), which a topic name may not")
	case !safeString(name):
		return errUnsafeText
	}
	return nil
}

// properties are the user properties of m, in order: ID, key, type,
// created-at, then the headers in name order. A property longer than an
// MQTT string can be (65,535 bytes) is an error.
func properties(m *outbox.Message) (paho.UserProperties, error) {
	props := make(paho.UserProperties, 0, 4+len(m.Headers))
	add := func(name, value string) {
		if safeString(value) {
			props = append(props, paho.UserProperty{Key: name, Value: value})
			return
		}
		props = append(props, paho.UserProperty{Key: PrefixBase64 + name, Value: base64.StdEncoding.EncodeToString([]byte(value))})
	}
	props = append(props, paho.UserProperty{Key: PropID, Value: m.ID.String()})
	if m.Key != "" {
		add(PropKey, m.Key)
	}
	if m.Type != "" {
		add(PropType, m.Type)
	}
	if !m.CreatedAt.IsZero() {
		props = append(props, paho.UserProperty{Key: PropCreatedAt, Value: m.CreatedAt.UTC().Format(time.RFC3339Nano)})
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		add(k, m.Headers[k])
	}
	for _, p := range props {
		if len(p.Key) > maxString || len(p.Value) > maxString {
			return nil, fmt.Errorf("user property %q is %d bytes, MQTT's limit is %d", p.Key, len(p.Value), maxString)
		}
	}
	return props, nil
}

// maxString is the longest MQTT UTF-8 string, in bytes.
const maxString = 65535

// Properties decodes the user properties of a message the Publisher sent
// into its event ID (PropID, "" when absent), key, type, created-at
// (raw), and headers, undoing the PrefixBase64 encoding. Properties that
// repeat keep their last value.
func Properties(props paho.UserProperties) (id, key, typ, created string, headers map[string]string, err error) {
	for _, p := range props {
		name, value := p.Key, p.Value
		if n, ok := strings.CutPrefix(name, PrefixBase64); ok {
			b, derr := base64.StdEncoding.DecodeString(value)
			if derr != nil {
				return id, key, typ, created, headers, fmt.Errorf("user property %q: not base64: %w", name, derr)
			}
			name, value = n, string(b)
		}
		switch name {
		case PropID:
			id = value
		case PropKey:
			key = value
		case PropType:
			typ = value
		case PropCreatedAt:
			created = value
		default:
			if headers == nil {
				headers = map[string]string{}
			}
			headers[name] = value
		}
	}
	return id, key, typ, created, headers, nil
}

// Decode turns a PUBLISH the Publisher sent into an inbox.Message: the ID
// from PropID (a UUID), the topic from the MQTT topic less topicPrefix,
// key, type, created-at and headers from their user properties, and the
// payload as it is. delivery is the delivery count to report. An error is
// permanent (inbox.IsPermanent): no redelivery can fix the message.
func Decode(p *paho.Publish, topicPrefix string, delivery int) (inbox.Message, error) {
	out := inbox.Message{Topic: strings.TrimPrefix(p.Topic, topicPrefix), Payload: p.Payload, Delivery: delivery}
	var props paho.UserProperties
	if p.Properties != nil {
		props = p.Properties.User
	}
	id, key, typ, created, headers, err := Properties(props)
	out.Key, out.Type, out.Headers = key, typ, headers
	if err != nil {
		return out, fmt.Errorf("%w: %w", inbox.ErrInvalidMessage, err)
	}
	if id == "" {
		return out, fmt.Errorf("%w: no %s user property", inbox.ErrInvalidMessage, PropID)
	}
	if out.ID, err = uuid.Parse(id); err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, PropID, id)
	}
	if created != "" {
		if out.CreatedAt, err = time.Parse(time.RFC3339Nano, created); err != nil {
			return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, PropCreatedAt, created, err)
		}
	}
	return out, nil
}
