package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
)

// maxShortstr is the longest AMQP 0-9-1 short string, in bytes: routing
// keys, header (field table) names, the type property.
const maxShortstr = 255

// Publisher publishes outbox messages to RabbitMQ with publisher confirms.
// It is safe for concurrent use.
type Publisher struct {
	cfg Config
	log interface {
		Info(string, ...any)
		Warn(string, ...any)
	}

	mu     sync.Mutex // guards sess and closed
	sess   *session
	closed bool
	done   chan struct{} // closed by Close
}

var _ publishers.Publisher = (*Publisher)(nil)

// New returns a Publisher and dials the broker; a failed dial is an error
// (classified unavailable when the broker cannot be reached). Later, a
// lost connection is dialed again by the next Publish.
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

// session is one connection and its confirm-mode channel.
type session struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
	blocks  chan amqp.Blocking
	barrier chan chan struct{}
	exited  chan struct{} // closed when run returns

	mu       sync.Mutex
	returned map[string]time.Time // message IDs returned, not yet claimed
	closeErr error                // why the channel closed, once it did
	blocked  string               // why the broker blocked the connection, "" when it does not
}

// dial connects and opens a confirm-mode channel.
func (p *Publisher) dial() (*session, error) {
	conn, err := amqp.DialConfig(p.cfg.URL, p.cfg.amqpConfig())
	if err != nil {
		return nil, publishers.Unavailable(fmt.Errorf("rabbitmq publisher: dial %s: %s", redact.URL(p.cfg.URL), redact.Text(err.Error())))
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, publishers.Unavailable(fmt.Errorf("rabbitmq publisher: open confirm channel: %w", err))
	}
	s := &session{
		conn: conn, ch: ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return)),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		blocks:   conn.NotifyBlocked(make(chan amqp.Blocking, 1)),
		barrier:  make(chan chan struct{}),
		exited:   make(chan struct{}),
		returned: map[string]time.Time{},
	}
	go s.run(p.cfg.ConfirmTimeout)
	p.log.Info("rabbitmq publisher connected")
	return s, nil
}

// run records returned messages until the channel closes. Returns arrive
// on an unbuffered channel before the ack of the same message, so once a
// barrier request is answered every return preceding an ack already seen
// is recorded.
func (s *session) run(keep time.Duration) {
	defer close(s.exited)
	returns, closes, blocks := s.returns, s.closes, s.blocks
	for returns != nil || closes != nil {
		select {
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			s.mu.Lock()
			s.blocked = ""
			if b.Active {
				s.blocked = b.Reason
				if s.blocked == "" {
					s.blocked = "no reason given"
				}
			}
			s.mu.Unlock()
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			s.mu.Lock()
			now := time.Now()
			if len(s.returned) > 4096 {
				for id, at := range s.returned {
					if now.Sub(at) > 2*keep {
						delete(s.returned, id)
					}
				}
			}
			s.returned[r.MessageId] = now
			s.mu.Unlock()
		case e, ok := <-closes:
			if !ok {
				closes = nil
				continue
			}
			s.mu.Lock()
			if e != nil {
				s.closeErr = e
			}
			s.mu.Unlock()
		case reply := <-s.barrier:
			close(reply)
		}
	}
}

// sync waits until every return received so far is recorded.
func (s *session) sync() {
	reply := make(chan struct{})
	select {
	case s.barrier <- reply:
		<-reply
	case <-s.exited:
	}
}

// claimReturned reports whether id came back, forgetting it.
func (s *session) claimReturned(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.returned[id]
	delete(s.returned, id)
	return ok
}

// blockedBy returns why the broker blocked the connection (a resource
// alarm), or "".
func (s *session) blockedBy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked
}

func (s *session) dead() bool { return s.conn.IsClosed() || s.ch.IsClosed() }

// why says why the channel closed.
func (s *session) why() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeErr != nil {
		return s.closeErr
	}
	return amqp.ErrClosed
}

// close closes the connection and waits for run to return.
func (s *session) close() {
	_ = s.conn.Close()
	<-s.exited
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
		p.log.Warn("rabbitmq publisher lost its channel, dialing again", "err", p.sess.why())
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

// Publish publishes msgs pipelined on one channel, then waits for every
// confirm, for Config.ConfirmTimeout or for ctx. It returns one error per
// message, nil when the broker confirmed it and did not return it. See the
// package documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	fail := func(from int, err error) []error {
		for i := from; i < len(msgs); i++ {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("rabbitmq publish %s: %w", msgs[i].ID, err)
			}
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		return fail(0, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
	}
	s, err := p.current()
	if err != nil {
		return fail(0, err)
	}
	if why := s.blockedBy(); why != "" {
		// Publishing now would block on the socket, past any deadline.
		return fail(0, publishers.Unavailable(fmt.Errorf("not sent: %w: %s", ErrBlocked, why)))
	}
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
send:
	for i := range msgs {
		m := &msgs[i]
		if len(m.Payload) > p.cfg.MaxMessageSize {
			errs[i] = publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %d bytes, limit %d", m.ID, ErrTooLarge, len(m.Payload), p.cfg.MaxMessageSize))
			continue
		}
		if err := p.representable(m); err != nil {
			errs[i] = publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %w", m.ID, ErrNotRepresentable, err))
			continue
		}
		if err := ctx.Err(); err != nil {
			fail(i, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
			break send
		}
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.routingKey(m.Topic), true, false, publishing(m))
		if err == nil && dc == nil {
			// amqp091 returns no confirmation when the channel left
			// confirm mode: it closed under us.
			err = ErrNoChannel
		}
		if err != nil {
			// The ones sent before still get their outcome below.
			fail(i, publishers.Unavailable(fmt.Errorf("not sent: %w", err)))
			break send
		}
		dcs[i] = dc
	}

	timer := time.NewTimer(p.cfg.ConfirmTimeout)
	defer timer.Stop()
	for i, dc := range dcs {
		if dc == nil {
			continue
		}
		select {
		case <-dc.Done():
			continue
		default:
		}
		var why error
		select {
		case <-dc.Done():
			continue
		case <-ctx.Done():
			why = fmt.Errorf("no confirm before the context ended: %w", ctx.Err())
		case <-timer.C:
			why = fmt.Errorf("no confirm within %v", p.cfg.ConfirmTimeout)
		case <-p.done:
			why = fmt.Errorf("no confirm before Close: %w", ErrClosed)
		}
		for j := i; j < len(dcs); j++ {
			if dcs[j] != nil && !done(dcs[j]) {
				errs[j] = publishers.Unavailable(fmt.Errorf("rabbitmq publish %s: %w", msgs[j].ID, why))
				dcs[j] = nil
			}
		}
		break
	}
	s.sync()
	for i, dc := range dcs {
		if dc == nil || errs[i] != nil {
			continue
		}
		m := &msgs[i]
		returned := s.claimReturned(m.ID.String())
		switch {
		case !dc.Acked() && s.dead():
			errs[i] = s.lost(m)
		case !dc.Acked():
			errs[i] = fmt.Errorf("rabbitmq publish %s: %w", m.ID, ErrNacked)
		case returned:
			errs[i] = fmt.Errorf("rabbitmq publish %s to exchange %q with routing key %q: %w", m.ID, p.cfg.Exchange, p.routingKey(m.Topic), ErrUnroutable)
		}
	}
	if refusal := s.refusal(); refusal != nil {
		p.isolate(ctx, msgs, errs, refusal)
	}
	return errs
}

// isolate handles a batch whose channel the broker closed because it
// refused a message (see refusal): the close does not say which one — nor
// whether it was this batch's or that of a concurrent Publish sharing the
// channel — and every message in flight failed as unavailable, as it would
// on every retry. Each of them is published again alone, in order, on a
// channel of its own: the refused ones fail as permanent, the others go
// out.
func (p *Publisher) isolate(ctx context.Context, msgs []outbox.Message, errs []error, refusal *amqp.Error) {
	var suspects []int
	for i, err := range errs {
		if publishers.IsUnavailable(err) {
			suspects = append(suspects, i)
		}
	}
	p.log.Warn("rabbitmq publisher: the broker refused a message and closed the channel; publishing the unconfirmed messages one at a time to find it",
		"messages", len(suspects), "reason", refusal.Reason)
	for _, i := range suspects {
		if ctx.Err() != nil {
			return // the rest keep their unavailable errors
		}
		errs[i] = p.publishAlone(ctx, &msgs[i])
	}
}

// publishAlone publishes m on a confirm-mode channel of its own and waits
// for its confirm: nothing else shares the channel, so a close is m's.
func (p *Publisher) publishAlone(ctx context.Context, m *outbox.Message) error {
	s, err := p.current()
	if err != nil {
		return fmt.Errorf("rabbitmq publish %s: %w", m.ID, err)
	}
	unavailable := func(err error) error {
		return publishers.Unavailable(fmt.Errorf("rabbitmq publish %s: %w", m.ID, err))
	}
	ch, err := s.conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		return unavailable(fmt.Errorf("open a channel: %w", err))
	}
	defer func() { _ = ch.Close() }()
	closes := ch.NotifyClose(make(chan *amqp.Error, 1))
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, p.cfg.Exchange, p.routingKey(m.Topic), true, false, publishing(m))
	if err == nil && dc == nil {
		err = ErrNoChannel
	}
	if err != nil {
		return unavailable(fmt.Errorf("not sent: %w", err))
	}
	timer := time.NewTimer(p.cfg.ConfirmTimeout)
	defer timer.Stop()
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return unavailable(fmt.Errorf("no confirm before the context ended: %w", ctx.Err()))
	case <-timer.C:
		return unavailable(fmt.Errorf("no confirm within %v", p.cfg.ConfirmTimeout))
	case <-p.done:
		return unavailable(fmt.Errorf("no confirm before Close: %w", ErrClosed))
	}
	if dc.Acked() {
		select {
		case <-returns: // a return comes before its ack
			return fmt.Errorf("rabbitmq publish %s to exchange %q with routing key %q: %w", m.ID, p.cfg.Exchange, p.routingKey(m.Topic), ErrUnroutable)
		default:
			return nil
		}
	}
	select {
	case e, ok := <-closes:
		if ok && e != nil && e.Code == amqp.PreconditionFailed && !s.conn.IsClosed() {
			return publishers.Permanent(fmt.Errorf("rabbitmq publish %s: %w: %s", m.ID, ErrRefused, e.Reason))
		}
		if ok && e != nil {
			return unavailable(fmt.Errorf("%w: %v", ErrNoChannel, e))
		}
	case <-timer.C:
	}
	return fmt.Errorf("rabbitmq publish %s: %w", m.ID, ErrNacked)
}

// representable checks the short strings of m's publishing, which
// amqp091 cannot encode over 255 bytes: it fails the write and closes the
// connection, failing every message in flight.
func (p *Publisher) representable(m *outbox.Message) error {
	if rk := p.routingKey(m.Topic); len(rk) > maxShortstr {
		return fmt.Errorf("routing key %s is %d bytes, limit %d", clip(rk), len(rk), maxShortstr)
	}
	if len(m.Type) > maxShortstr {
		return fmt.Errorf("type %s is %d bytes, limit %d", clip(m.Type), len(m.Type), maxShortstr)
	}
	for k := range m.Headers {
		if len(k) > maxShortstr {
			return fmt.Errorf("header name %s is %d bytes, limit %d", clip(k), len(k), maxShortstr)
		}
	}
	return nil
}

// clip quotes the start of a long string for an error.
func clip(s string) string {
	if len(s) > 40 {
		return strconv.Quote(strings.ToValidUTF8(s[:40], "")) + "…"
	}
	return strconv.Quote(s)
}

// refusal is the error with which the broker closed the channel when it
// refused a message for good — 406 PRECONDITION_FAILED, e.g. a message over
// its max_message_size — with the connection still open; nil otherwise.
func (s *session) refusal() *amqp.Error {
	if !s.dead() {
		return nil
	}
	var ae *amqp.Error
	if errors.As(s.why(), &ae) && ae.Code == amqp.PreconditionFailed && !s.conn.IsClosed() {
		return ae
	}
	return nil
}

// lost is the error of m, whose confirm never came because the channel
// closed: unavailable, unless the server closed the channel because the
// exchange does not exist.
func (s *session) lost(m *outbox.Message) error {
	why := s.why()
	err := fmt.Errorf("rabbitmq publish %s: %w: %v", m.ID, ErrNoChannel, why)
	var ae *amqp.Error
	if errors.As(why, &ae) && ae.Code == amqp.NotFound && !s.conn.IsClosed() {
		return err
	}
	return publishers.Unavailable(err)
}

func done(dc *amqp.DeferredConfirmation) bool {
	select {
	case <-dc.Done():
		return true
	default:
		return false
	}
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
