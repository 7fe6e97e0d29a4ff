package verify

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/inbox"
)

// Headers the webhook publisher sets besides the Standard Webhooks ones.
// Topic, Key and Type go in their plain header when it carries them
// unchanged (PlainHeaderValue), else in their -Base64 header, as standard
// base64 with padding of their UTF-8 bytes; at most one of the two is set,
// none when the value is empty.
const (
	HeaderTopic       = "Outbox-Topic"
	HeaderTopicBase64 = "Outbox-Topic-Base64"
	HeaderKey         = "Outbox-Key"
	HeaderKeyBase64   = "Outbox-Key-Base64"
	HeaderType        = "Outbox-Type"
	HeaderTypeBase64  = "Outbox-Type-Base64"
	// HeaderCreatedAt carries Message.CreatedAt, RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

// PlainHeaderValue reports whether v travels in a plain header unchanged
// through any HTTP stack: printable ASCII only (no control characters, no
// bytes above 0x7e, which receivers may read as Latin-1), not beginning or
// ending with a space.
func PlainHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return strings.Trim(v, " ") == v
}

// SetEncoded sets v in h under plain, or in base64 under encoded when a
// plain header would not carry it unchanged. An empty v sets nothing.
func SetEncoded(h http.Header, plain, encoded, v string) {
	switch {
	case v == "":
	case PlainHeaderValue(v):
		h[plain] = []string{v}
	default:
		h[encoded] = []string{base64.StdEncoding.EncodeToString([]byte(v))}
	}
}

// Decoded returns the value SetEncoded set in h: the encoded header's
// when there is one, else the plain one's ("" when neither is there).
func Decoded(h http.Header, plain, encoded string) (string, error) {
	enc := h.Get(encoded)
	if enc == "" {
		return h.Get(plain), nil
	}
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("header %s: not standard base64", encoded)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("header %s: not UTF-8", encoded)
	}
	return string(b), nil
}

// transport are the headers Message leaves out of inbox.Message.Headers:
// HTTP's own and those the publisher sets.
var transport = map[string]bool{
	HeaderID: true, HeaderTimestamp: true, HeaderSignature: true,
	HeaderTopic: true, HeaderTopicBase64: true, HeaderKey: true, HeaderKeyBase64: true,
	HeaderType: true, HeaderTypeBase64: true, HeaderCreatedAt: true,
	"Content-Length": true, "Content-Type": true, "User-Agent": true, "Accept-Encoding": true,
	"Authorization": true, "Connection": true, "Host": true,
}

// Message verifies a request (see Verify) and returns it as an
// inbox.Message: ID from webhook-id (a UUID), Topic, Key, Type and
// CreatedAt from the Outbox-* headers, Payload = body, and Headers = the
// request's other headers (names in lower case, as HTTP/2 sends them; the
// first value of each), without HTTP's own (Content-Type, User-Agent, …)
// and the publisher's. A verified request whose headers do not decode
// fails with an error inbox.IsPermanent accepts: answer it with a 4xx.
func (v *Verifier) Message(h http.Header, body []byte) (inbox.Message, error) {
	raw, err := v.Verify(h, body)
	if err != nil {
		return inbox.Message{}, err
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return inbox.Message{}, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, HeaderID, raw)
	}
	m := inbox.Message{ID: id, Payload: body}
	for _, f := range []struct {
		dst            *string
		plain, encoded string
	}{{&m.Topic, HeaderTopic, HeaderTopicBase64}, {&m.Key, HeaderKey, HeaderKeyBase64}, {&m.Type, HeaderType, HeaderTypeBase64}} {
		if *f.dst, err = Decoded(h, f.plain, f.encoded); err != nil {
			return m, fmt.Errorf("%w: %w", inbox.ErrInvalidMessage, err)
		}
	}
	if s := h.Get(HeaderCreatedAt); s != "" {
		if m.CreatedAt, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return m, fmt.Errorf("%w: %s %q is not RFC 3339", inbox.ErrInvalidMessage, HeaderCreatedAt, s)
		}
	}
	for k, vs := range h {
		if transport[http.CanonicalHeaderKey(k)] || len(vs) == 0 {
			continue
		}
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		m.Headers[strings.ToLower(k)] = vs[0]
	}
	return m, nil
}
