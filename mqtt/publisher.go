package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close, or Close came first (unavailable).
	ErrClosed = errors.New("mqtt publisher closed")
	// ErrTooLarge: the PUBLISH packet would exceed the broker's Maximum
	// Packet Size or PublisherConfig.MaxPacketSize (permanent).
	ErrTooLarge = errors.New("message too large")
	// ErrInvalidTopic: the MQTT topic a message maps to cannot be
	// published to (permanent).
	ErrInvalidTopic = errors.New("invalid MQTT topic name")
)

// Publisher publishes outbox messages to an MQTT 5 broker at QoS 1. It
// is safe for concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	url       *brokerURL
	where     string // the URL, redacted
	tlsConfig *tls.Config
	log       *slog.Logger

	closeCtx    context.Context // canceled by Close
	closeCancel context.CancelFunc
	dialing     chan struct{} // a semaphore: one dial at a time

	rw     sync.RWMutex // held shared by Publish and Check, exclusively by Close
	mu     sync.Mutex   // guards cur and closed
	cur    *conn
	closed bool
}

var _ publishers.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher configured by cfg (nil: every
// default). It does not connect: the first Publish (or Check) does, and
// connects again whenever the connection was lost. So it succeeds while
// the broker is down (Publish fails as unavailable until it is up) and
// when the broker refuses the configuration (Publish fails as
// misconfigured): Check tells these apart before the first publish.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	u, _ := parseBrokerURL(c.URL) // validate parsed it
	p := &Publisher{cfg: c, url: u, where: redact.URL(c.URL), log: c.Logger, dialing: make(chan struct{}, 1)}
	if u.tls {
		p.tlsConfig = &tls.Config{ServerName: u.host, MinVersion: tls.VersionTLS12}
		if c.TLSConfig != nil {
			p.tlsConfig = c.TLSConfig.Clone()
			if p.tlsConfig.ServerName == "" {
				p.tlsConfig.ServerName = u.host
			}
		}
	}
	p.closeCtx, p.closeCancel = context.WithCancel(context.Background())
	return p, nil
}

// topic maps an outbox topic to the MQTT topic name.
func (p *Publisher) topic(topic string) string {
	if p.cfg.Topic != nil {
		return p.cfg.Topic(topic)
	}
	return p.cfg.TopicPrefix + topic
}

// Publish sends msgs at QoS 1 on the publisher's connection, every one in
// flight at once (up to the broker's Receive Maximum; paho waits for a
// free slot), in the order of msgs, and waits for their PUBACKs. It
// returns one error per message, nil when the broker acknowledged it
// with a success reason code (0x00, or 0x10 No matching subscribers).
// See the package documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	fail := func(i int, err error) { errs[i] = fmt.Errorf("mqtt publish %s: %w", msgs[i].ID, err) }
	failAll := func(err error) {
		for i := range msgs {
			if errs[i] == nil {
				fail(i, err)
			}
		}
	}
	p.rw.RLock()
	defer p.rw.RUnlock()
	if p.isClosed() {
		failAll(publishers.Unavailable(ErrClosed))
		return errs
	}
	if err := ctx.Err(); err != nil {
		failAll(publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
		return errs
	}
	ctx, cancel := p.callContext(ctx)
	defer cancel()

	pubs := make([]*paho.Publish, len(msgs))
	pending := 0
	for i := range msgs {
		m := &msgs[i]
		name := p.topic(m.Topic)
		if err := checkTopicName(name); err != nil {
			fail(i, publishers.Permanent(fmt.Errorf("%w %q (from topic %q): %w", ErrInvalidTopic, name, m.Topic, err)))
			continue
		}
		props, err := properties(m)
		if err != nil {
			fail(i, publishers.Permanent(fmt.Errorf("%w: %w", ErrTooLarge, err)))
			continue
		}
		pubs[i] = &paho.Publish{QoS: 1, Retain: p.cfg.Retain, Topic: name, Payload: m.Payload,
			Properties: &paho.PublishProperties{User: props}}
		pending++
	}
	if pending == 0 {
		return errs
	}
	c, err := p.connection(ctx)
	if err != nil {
		failAll(err)
		return errs
	}
	limit := uint64(MaxPacket)
	if p.cfg.MaxPacketSize > 0 {
		limit = min(limit, uint64(p.cfg.MaxPacketSize))
	}
	if c.maxPacket > 0 {
		limit = min(limit, uint64(c.maxPacket))
	}
	waiters := p.send(ctx, c, msgs, pubs, errs, limit, fail)
	for i, ch := range waiters {
		if ch != nil {
			if err := p.await(ctx, c, ch, pubs[i].Topic); err != nil {
				fail(i, err)
			}
		}
	}
	return errs
}

// send hands the PUBLISH packets to paho in order, each with a channel
// for its acknowledgement; a packet over limit fails as permanent,
// unsent. Once one cannot be sent (the connection is gone, ctx ended),
// neither is any later one, so a call's messages are stored in order or
// not at all from the first failure on.
func (p *Publisher) send(ctx context.Context, c *conn, msgs []outbox.Message, pubs []*paho.Publish, errs []error, limit uint64, fail func(int, error)) []chan packets.ControlPacket {
	waiters := make([]chan packets.ControlPacket, len(msgs))
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	var stop error
	for i, pub := range pubs {
		if pub == nil || errs[i] != nil {
			continue
		}
		if stop != nil {
			fail(i, fmt.Errorf("not sent: an earlier message of the call could not be sent: %w", stop))
			continue
		}
		if size := packetSize(pub); size > limit {
			fail(i, publishers.Permanent(fmt.Errorf("%w: the PUBLISH packet would be %d bytes (payload %d), limit %d", ErrTooLarge, size, len(pub.Payload), limit)))
			continue
		}
		ch := make(chan packets.ControlPacket, 1)
		c.sess.expect(ch)
		_, err := c.client.PublishWithOptions(ctx, pub, paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
		switch {
		case err == nil:
			waiters[i] = ch
		case errors.Is(err, paho.ErrNetworkErrorAfterStored):
			// In the session, the write failed: the connection is
			// going down, and await sees it.
			waiters[i] = ch
		default:
			c.sess.expect(nil)
			switch {
			case p.closeCtx.Err() != nil:
				err = publishers.Unavailable(ErrClosed)
			case !c.alive():
				err = c.lostError(p.cfg.ClientID)
			default:
				err = publishers.Unavailable(err)
			}
			stop = err
			fail(i, fmt.Errorf("not sent to %q: %w", pub.Topic, err))
		}
	}
	return waiters
}

// await waits for the acknowledgement of one PUBLISH and returns its
// error, classified.
func (p *Publisher) await(ctx context.Context, c *conn, ch chan packets.ControlPacket, topic string) error {
	var resp packets.ControlPacket
	select {
	case resp = <-ch:
	case <-c.done:
		select {
		case resp = <-ch: // acknowledged just before the end
		default:
			return fmt.Errorf("to %q: %w", topic, c.lostError(p.cfg.ClientID))
		}
	case <-ctx.Done():
		err := ctx.Err()
		if p.closeCtx.Err() != nil {
			err = ErrClosed
		}
		return publishers.Unavailable(fmt.Errorf("to %q: no PUBACK: %w", topic, err))
	}
	pa, ok := resp.Content.(*packets.Puback)
	if !ok { // the session was closed with the packet in flight
		return fmt.Errorf("to %q: %w", topic, c.lostError(p.cfg.ClientID))
	}
	if pa.ReasonCode < 0x80 {
		return nil
	}
	why := ""
	if pa.Properties != nil && pa.Properties.ReasonString != "" {
		why = fmt.Sprintf(" (%q)", pa.Properties.ReasonString)
	}
	return classifyPuback(fmt.Errorf("to %q: the broker refused it: PUBACK %s%s", topic, reasonText(pa.ReasonCode), why), pa.ReasonCode)
}

// packetSize is the size of pub's PUBLISH packet on the wire: the fixed
// header and the remaining length (topic, packet ID, properties,
// payload).
func packetSize(pub *paho.Publish) uint64 {
	var rest uint64
	for _, b := range pub.Packet().Buffers() {
		rest += uint64(len(b))
	}
	header := uint64(2)
	for n := rest; n >= 128; n >>= 7 {
		header++
	}
	return header + rest
}

// callContext is ctx ended by Close too, and bounded by AckTimeout when
// it has no deadline.
func (p *Publisher) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if _, ok := ctx.Deadline(); ok {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithTimeout(ctx, p.cfg.AckTimeout)
	}
	stop := context.AfterFunc(p.closeCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// connection returns the live connection, connecting when there is none
// (one dial at a time; the others wait for it).
func (p *Publisher) connection(ctx context.Context) (*conn, error) {
	if c := p.current(); c != nil && c.alive() {
		return c, nil
	}
	select {
	case p.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, publishers.Unavailable(fmt.Errorf("not sent: waiting for the connection to %s: %w", p.where, ctx.Err()))
	}
	defer func() { <-p.dialing }()
	old := p.current()
	if old != nil && old.alive() {
		return old, nil
	}
	if old != nil {
		old.close() // gone already: this releases its session
	}
	c, err := p.dial(ctx)
	if err != nil {
		if p.closeCtx.Err() != nil {
			return nil, publishers.Unavailable(ErrClosed)
		}
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.close()
		return nil, publishers.Unavailable(ErrClosed)
	}
	p.cur = c
	p.log.Info("mqtt publisher: connected", "url", p.where, "client_id", p.cfg.ClientID, "max_packet_size", c.maxPacket)
	return c, nil
}

func (p *Publisher) current() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *Publisher) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close fails the publishes still waiting (as unavailable), disconnects
// and waits until no goroutine of the publisher is left. Calling Close
// again does nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.closeCancel()
	p.rw.Lock() // every Publish and Check has returned
	defer p.rw.Unlock()
	if c := p.current(); c != nil {
		c.close()
	}
	return nil
}
