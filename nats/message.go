package nats

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
)

// Headers the publisher sets on every message, besides the message's own.
// See the package documentation for when Key and Type go in their plain
// or their encoded header.
const (
	// HeaderMsgID is JetStream's dedup header; it carries the message ID.
	HeaderMsgID = jetstream.MsgIDHeader // "Nats-Msg-Id"
	// HeaderKey carries Message.Key when it is not empty and a NATS
	// header carries it unchanged (PlainHeaderValue).
	HeaderKey = "Outbox-Key"
	// HeaderKeyBase64 carries Message.Key, in standard base64 with padding
	// (RFC 4648 §4) of its UTF-8 bytes, when a NATS header would alter it:
	// it begins or ends with a space or TAB, or holds CR or LF.
	HeaderKeyBase64 = "Outbox-Key-Base64"
	// HeaderType carries Message.Type when it is not empty and a NATS
	// header carries it unchanged (PlainHeaderValue).
	HeaderType = "Outbox-Type"
	// HeaderTypeBase64 carries Message.Type in base64, as HeaderKeyBase64
	// carries Message.Key.
	HeaderTypeBase64 = "Outbox-Type-Base64"
	// HeaderCreatedAt carries Message.CreatedAt in RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

// ownHeaders are the headers the publisher sets; a message header of one
// of these names (in any case) is dropped, so that a consumer can trust
// them.
var ownHeaders = []string{HeaderMsgID, HeaderKey, HeaderKeyBase64, HeaderType, HeaderTypeBase64, HeaderCreatedAt}

var errBadHeader = errors.New("header not representable in NATS")

// PlainHeaderValue reports whether a NATS header carries v unchanged, so
// that Key and Type may go in their plain headers: v neither begins nor
// ends with a space or TAB and holds no CR or LF. nats.go trims a value's
// leading and trailing ASCII whitespace (space, TAB, CR, LF) when it sends
// it and the leading spaces and TABs when it reads it, and replaces CR and
// LF inside it with spaces; everything else (other control characters,
// any UTF-8) arrives byte for byte.
func PlainHeaderValue(v string) bool {
	if strings.ContainsAny(v, "\r\n") {
		return false
	}
	return strings.Trim(v, " \t") == v
}

// encoded returns the header that carries v, plain or, when a header
// would alter it, encoded in base64, and its value; no name for an empty
// v.
func encoded(plain, encoded, v string) (name, value string) {
	switch {
	case v == "":
		return "", ""
	case PlainHeaderValue(v):
		return plain, v
	default:
		return encoded, base64.StdEncoding.EncodeToString([]byte(v))
	}
}

// KeyAndType returns the Key and Type of a message the publisher built,
// from h: the encoded header when there is one, else the plain one (empty
// when neither is there). An encoded header that is not valid base64 of
// UTF-8 is an error.
func KeyAndType(h nats.Header) (key, typ string, err error) {
	if key, err = decoded(h, HeaderKey, HeaderKeyBase64); err != nil {
		return "", "", err
	}
	if typ, err = decoded(h, HeaderType, HeaderTypeBase64); err != nil {
		return "", "", err
	}
	return key, typ, nil
}

func decoded(h nats.Header, plain, encoded string) (string, error) {
	vs, ok := h[encoded]
	if !ok || len(vs) == 0 {
		return h.Get(plain), nil
	}
	b, err := base64.StdEncoding.DecodeString(vs[0])
	if err != nil {
		return "", fmt.Errorf("header %s: %w", encoded, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("header %s: not UTF-8", encoded)
	}
	return string(b), nil
}

// subject maps a topic to its subject.
func (p *Publisher) subject(topic string) string {
	switch {
	case p.cfg.Subject != nil:
		return p.cfg.Subject(topic)
	case p.cfg.prefixed():
		return p.cfg.SubjectPrefix + "." + topic
	default:
		return topic
	}
}

// checkSubject accepts a subject: non-empty tokens separated by '.', no
// whitespace or control characters; wildcards only when allowed (a
// consumer's filter), '>' only last. A publisher publishes to none.
func checkSubject(s string, wildcards bool) error {
	if s == "" {
		return fmt.Errorf("%w: empty", nats.ErrBadSubject)
	}
	last := strings.LastIndexByte(s, '.') + 1 // where the last token starts
	for start := 0; start <= len(s); {
		end := strings.IndexByte(s[start:], '.')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		switch tok := s[start:end]; tok {
		case "":
			return fmt.Errorf("%w %q: empty token", nats.ErrBadSubject, s)
		case "*", ">":
			if !wildcards {
				return fmt.Errorf("%w %q: wildcard", nats.ErrBadSubject, s)
			}
			if tok == ">" && start != last {
				return fmt.Errorf("%w %q: '>' not last", nats.ErrBadSubject, s)
			}
		}
		start = end + 1
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w %q: whitespace or control character", nats.ErrBadSubject, s)
		}
	}
	return nil
}

// headerNameSeparators are the printable ASCII characters nats.go refuses
// in a header name: what it accepts are the token characters of RFC 9110.
const headerNameSeparators = "\"()/,:;<=>?@[\\]{}"

// checkHeader accepts a header NATS carries unchanged: a name of token
// characters, a value PlainHeaderValue accepts.
func checkHeader(k, v string) error {
	if k == "" {
		return fmt.Errorf("%w: empty name", errBadHeader)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(headerNameSeparators, c) >= 0 {
			return fmt.Errorf("%w: name %q: only letters, digits and !#$%%&'*+-.^_`|~ are allowed", errBadHeader, k)
		}
	}
	if !PlainHeaderValue(v) {
		return fmt.Errorf("%w: value of %q holds CR or LF, or begins or ends with a space or TAB (NATS would alter it)", errBadHeader, k)
	}
	return nil
}

// natsMsg builds the NATS message for m and returns its size on the wire
// as the server counts it against max_payload (headers + payload).
func (p *Publisher) natsMsg(m *outbox.Message) (*nats.Msg, int, error) {
	subj := p.subject(m.Topic)
	if err := checkSubject(subj, false); err != nil {
		return nil, 0, fmt.Errorf("topic %q: %w", m.Topic, err)
	}
	h := make(nats.Header, len(m.Headers)+4)
	for k, v := range m.Headers {
		if err := checkHeader(k, v); err != nil {
			return nil, 0, err
		}
		if own(k) {
			continue
		}
		h[k] = []string{v}
	}
	// The publisher's own headers' values share one array.
	vals := make([]string, 0, 4)
	set := func(name, v string) {
		vals = append(vals, v)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set(HeaderMsgID, m.ID.String())
	if name, v := encoded(HeaderKey, HeaderKeyBase64, m.Key); name != "" {
		set(name, v)
	}
	if name, v := encoded(HeaderType, HeaderTypeBase64, m.Type); name != "" {
		set(name, v)
	}
	if !m.CreatedAt.IsZero() {
		set(HeaderCreatedAt, m.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	size := len(m.Payload) + headerSize(h)
	return &nats.Msg{Subject: subj, Header: h, Data: m.Payload}, size, nil
}

// own reports whether k names a header the publisher sets.
func own(k string) bool {
	for _, o := range ownHeaders {
		if strings.EqualFold(k, o) {
			return true
		}
	}
	return false
}

// headerSize is the length of h encoded as nats.go sends it:
// "NATS/1.0\r\n", "name: value\r\n" per value, "\r\n".
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}
