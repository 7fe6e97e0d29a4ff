package rabbitmq

import (
	"errors"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// Headers the publisher sets on every message, besides the message's own.
const (
	// HeaderKey carries Message.Key, when not empty.
	HeaderKey = "Outbox-Key"
	// HeaderCreatedAt carries Message.CreatedAt in RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close, or waiting for its confirm when
	// Close was called (unavailable).
	ErrClosed = errors.New("rabbitmq publisher closed")
	// ErrUnroutable: no queue took the message (unmarked: retried).
	ErrUnroutable = errors.New("unroutable: returned by the broker")
	// ErrNacked: the broker nacked the message (unmarked: retried).
	ErrNacked = errors.New("nacked by the broker")
	// ErrTooLarge: the payload exceeds Config.MaxMessageSize (permanent).
	ErrTooLarge = errors.New("message too large")
	// ErrBlocked: the broker blocked the connection (connection.blocked,
	// a memory or disk alarm): not sent (unavailable).
	ErrBlocked = errors.New("connection blocked by the broker")
	// ErrNoChannel: the connection or channel closed before the confirm
	// (unavailable).
	ErrNoChannel = errors.New("connection or channel closed")
	// ErrNotRepresentable: the message has a routing key, header name or
	// type over AMQP's 255-byte short strings (permanent). Not sent: the
	// client library would close the whole connection over it.
	ErrNotRepresentable = errors.New("not representable in AMQP 0-9-1")
	// ErrRefused: the broker refused the message and closed the channel
	// (406 PRECONDITION_FAILED, e.g. a message over the server's
	// max_message_size) (permanent).
	ErrRefused = errors.New("refused by the broker")
	// ErrReservedHeader: the message has a header named CC or BCC, which
	// RabbitMQ reads as sender-selected distribution: more routing keys
	// (permanent). Not sent.
	ErrReservedHeader = errors.New("header reserved by RabbitMQ")
	// ErrConfigRefused: the broker closed the channel or the connection
	// because it refuses the configuration (403 ACCESS_REFUSED, 404
	// NOT_FOUND for the exchange, 530 NOT_ALLOWED for the vhost)
	// (misconfigured).
	ErrConfigRefused = errors.New("the broker refused the configuration")
)

// Publisher publishes outbox messages to RabbitMQ with publisher confirms.
// It is safe for concurrent use.
type Publisher struct {
	cfg Config
	log interface {
		Info(string, ...any)
		Warn(string, ...any)
		Error(string, ...any)
	}

	mu     sync.Mutex // guards sess and closed
	sess   *session
	closed bool
	done   chan struct{} // closed by Close
}

var _ publishers.Publisher = (*Publisher)(nil)

// New returns a Publisher and dials the broker. A failed dial is an error
// classified publishers.Misconfigured when the broker refuses the
// credentials or the vhost (403 ACCESS_REFUSED, 530 NOT_ALLOWED),
// publishers.Unavailable when it cannot be reached. Later, a lost
// connection is dialed again by the next Publish. New does not look at the
// exchange: Check does.
func New(cfg Config) (*Publisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, done: make(chan struct{})}
	p.log = cfg.Logger.With("url", redact.URL(cfg.URL))
	s, err := p.dial()
	if err != nil {
		return nil, err
	}
	p.sess = s
	return p, nil
}

// Capabilities: RabbitMQ neither drops re-sent message IDs nor keeps
// retried messages in order.
func (p *Publisher) Capabilities() publishers.Capabilities {
	return publishers.Capabilities{}
}

func (p *Publisher) routingKey(topic string) string {
	if p.cfg.RoutingKey != nil {
		return p.cfg.RoutingKey(topic)
	}
	return topic
}

// current returns the live session, dialing when there is none.
func (p *Publisher) current() (*session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, publishers.Unavailable(ErrClosed)
	}
	if p.sess != nil && !p.sess.dead() {
		return p.sess, nil
	}
	if p.sess != nil {
		if why := p.sess.configRefusal(); why != nil {
			p.log.Error("rabbitmq publisher: the broker refused the configuration and closed the channel; dialing again", "err", why)
		} else {
			p.log.Warn("rabbitmq publisher lost its channel, dialing again", "err", p.sess.why())
		}
		p.sess.close()
		p.sess = nil
	}
	s, err := p.dial()
	if err != nil {
		return nil, err
	}
	p.sess = s
	return s, nil
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

// Close closes the connection. Publish calls waiting for confirms return
// at once, their messages failed as unavailable. Calling Close again does
// nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.done)
	if p.sess != nil {
		p.sess.close()
		p.sess = nil
	}
	return nil
}
