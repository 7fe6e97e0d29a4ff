package nats

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
)

// Headers the publisher sets on every message, besides the message's own.
const (
	// HeaderMsgID is JetStream's dedup header; it carries the message ID.
	HeaderMsgID = jetstream.MsgIDHeader // "Nats-Msg-Id"
	// HeaderKey carries Message.Key, when not empty.
	HeaderKey = "Outbox-Key"
	// HeaderType carries Message.Type, when not empty.
	HeaderType = "Outbox-Type"
	// HeaderCreatedAt carries Message.CreatedAt in RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

var errBadHeader = errors.New("header not representable in NATS")

// subject maps a topic to its subject.
func (p *Publisher) subject(topic string) string {
	switch {
	case p.cfg.Subject != nil:
		return p.cfg.Subject(topic)
	case p.cfg.SubjectPrefix != "":
		return p.cfg.SubjectPrefix + "." + topic
	default:
		return topic
	}
}

// checkSubject accepts a subject a publisher may publish to: non-empty
// tokens separated by '.', no whitespace or control characters, no
// wildcards.
func checkSubject(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty", nats.ErrBadSubject)
	}
	for _, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("%w %q: empty token", nats.ErrBadSubject, s)
		case tok == "*" || tok == ">":
			return fmt.Errorf("%w %q: wildcard", nats.ErrBadSubject, s)
		}
		for _, r := range tok {
			if r <= ' ' || r == 0x7f {
				return fmt.Errorf("%w %q: whitespace or control character", nats.ErrBadSubject, s)
			}
		}
	}
	return nil
}

// checkHeader accepts a header the NATS protocol can carry: a name without
// ':' , whitespace or control characters, a value without CR or LF.
func checkHeader(k, v string) error {
	if k == "" {
		return fmt.Errorf("%w: empty name", errBadHeader)
	}
	for _, r := range k {
		if r <= ' ' || r == ':' || r == 0x7f {
			return fmt.Errorf("%w: name %q", errBadHeader, k)
		}
	}
	if strings.ContainsAny(v, "\r\n") {
		return fmt.Errorf("%w: value of %q holds CR or LF", errBadHeader, k)
	}
	return nil
}

// natsMsg builds the NATS message for m and returns its size on the wire
// as the server counts it against max_payload (headers + payload).
func (p *Publisher) natsMsg(m *outbox.Message) (*nats.Msg, int, error) {
	subj := p.subject(m.Topic)
	if err := checkSubject(subj); err != nil {
		return nil, 0, fmt.Errorf("topic %q: %w", m.Topic, err)
	}
	h := make(nats.Header, len(m.Headers)+4)
	for k, v := range m.Headers {
		if err := checkHeader(k, v); err != nil {
			return nil, 0, err
		}
		h[k] = []string{v}
	}
	h[HeaderMsgID] = []string{m.ID.String()}
	if m.Key != "" {
		h[HeaderKey] = []string{m.Key}
	}
	if m.Type != "" {
		h[HeaderType] = []string{m.Type}
	}
	if !m.CreatedAt.IsZero() {
		h[HeaderCreatedAt] = []string{m.CreatedAt.UTC().Format(time.RFC3339Nano)}
	}
	size := len(m.Payload) + headerSize(h)
	return &nats.Msg{Subject: subj, Header: h, Data: m.Payload}, size, nil
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
