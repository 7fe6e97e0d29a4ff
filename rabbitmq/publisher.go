package rabbitmq

import (
	"sync"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// Publisher publishes outbox messages to RabbitMQ with publisher confirms.
// It is safe for concurrent use.
type Publisher struct {
	cfg PublisherConfig
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

// NewPublisher returns a Publisher and dials the broker; cfg may be nil
// (every default). A failed dial is an error classified
// publishers.Misconfigured when the broker refuses the credentials or the
// vhost (403 ACCESS_REFUSED, 530 NOT_ALLOWED), publishers.Unavailable when
// it cannot be reached. Later, a lost connection is dialed again by the
// next Publish. NewPublisher does not look at the exchange: Check does.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, done: make(chan struct{})}
	p.log = c.Logger.With("url", redact.URL(c.URL))
	s, err := p.dial()
	if err != nil {
		return nil, err
	}
	p.sess = s
	return p, nil
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
