package nats

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/inbox"
)

// Headers the subscriber sets on a dead-lettered message, besides the
// original's (whose Nats-Msg-Id moves to HeaderOriginalMsgID).
const (
	// HeaderError is the error that made the message dead.
	HeaderError = "Outbox-Error"
	// HeaderDeliveries is how many times it was delivered.
	HeaderDeliveries = "Outbox-Deliveries"
	// HeaderSubject is the subject it arrived on.
	HeaderSubject = "Outbox-Subject"
	// HeaderStream and HeaderStreamSeq locate it in its stream.
	HeaderStream    = "Outbox-Stream"
	HeaderStreamSeq = "Outbox-Stream-Seq"
	// HeaderConsumer is the durable consumer that gave up on it.
	HeaderConsumer = "Outbox-Consumer"
	// HeaderOriginalMsgID is the message's Nats-Msg-Id (its event ID).
	HeaderOriginalMsgID = "Outbox-Original-Msg-Id"
)

// maxErrorHeader bounds HeaderError's length.
const maxErrorHeader = 1024

// Decode turns a JetStream message a Publisher published into an
// inbox.Message: the ID from Nats-Msg-Id (it must be a UUID), the topic
// from the subject less subjectPrefix and its '.' (none stripped when
// subjectPrefix is "" or NoSubjectPrefix), Key and Type from
// Outbox-Key-Base64 and Outbox-Type-Base64 when set, else from Outbox-Key
// and Outbox-Type (KeyAndType: byte for byte what was enqueued), CreatedAt
// from Outbox-Created-At, and the other headers (first value of each,
// without the Nats-* ones) as Headers. An error is permanent
// (inbox.IsPermanent): no redelivery can fix the message.
func Decode(m jetstream.Msg, subjectPrefix string) (inbox.Message, error) {
	h := m.Headers()
	topic := m.Subject()
	if subjectPrefix != "" && subjectPrefix != NoSubjectPrefix {
		topic = strings.TrimPrefix(topic, subjectPrefix+".")
	}
	out := inbox.Message{Topic: topic, Payload: m.Data()}
	if md, err := m.Metadata(); err == nil {
		out.Delivery = int(md.NumDelivered)
	}
	raw := h.Get(HeaderMsgID)
	if raw == "" {
		return out, fmt.Errorf("%w: no %s header", inbox.ErrInvalidMessage, HeaderMsgID)
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return out, fmt.Errorf("%w: %s %q is not a UUID", inbox.ErrInvalidMessage, HeaderMsgID, raw)
	}
	out.ID = id
	if out.Key, out.Type, err = KeyAndType(h); err != nil {
		return out, fmt.Errorf("%w: %w", inbox.ErrInvalidMessage, err)
	}
	if v := h.Get(HeaderCreatedAt); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return out, fmt.Errorf("%w: %s %q: %w", inbox.ErrInvalidMessage, HeaderCreatedAt, v, err)
		}
		out.CreatedAt = t
	}
	for k, vs := range h {
		switch {
		case len(vs) == 0, k == HeaderKey, k == HeaderKeyBase64, k == HeaderType,
			k == HeaderTypeBase64, k == HeaderCreatedAt, strings.HasPrefix(k, "Nats-"):
			continue
		}
		if out.Headers == nil {
			out.Headers = make(map[string]string, len(h))
		}
		out.Headers[k] = vs[0]
	}
	return out, nil
}

// deadLetterMsg is the message published to the dead-letter subject.
func deadLetterMsg(subject string, m jetstream.Msg, md *jetstream.MsgMetadata, durable string, cause error) *nats.Msg {
	h := make(nats.Header, len(m.Headers())+8)
	for k, vs := range m.Headers() {
		h[k] = append([]string(nil), vs...)
	}
	if id := h.Get(HeaderMsgID); id != "" {
		h.Set(HeaderOriginalMsgID, id)
	}
	h.Del(HeaderMsgID)
	h.Set(HeaderError, headerValue(cause.Error(), maxErrorHeader))
	h.Set(HeaderSubject, m.Subject())
	h.Set(HeaderConsumer, durable)
	if md != nil {
		h.Set(HeaderDeliveries, fmt.Sprint(md.NumDelivered))
		h.Set(HeaderStream, md.Stream)
		h.Set(HeaderStreamSeq, fmt.Sprint(md.Sequence.Stream))
	}
	return &nats.Msg{Subject: subject, Header: h, Data: m.Data()}
}

// headerValue makes s fit a NATS header value: no CR or LF, at most n bytes
// of valid UTF-8.
func headerValue(s string, n int) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// subjectMatches reports whether subject (no wildcards) matches filter.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
