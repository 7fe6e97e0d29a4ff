package rabbitmq

import (
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// session is one connection and its confirm-mode channel.
type session struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
	blocks  chan amqp.Blocking
	barrier chan chan struct{}
	shut    chan struct{} // closed once the channel's close notification is in (see awaitClose)
	exited  chan struct{} // closed when run returns

	mu       sync.Mutex
	returned map[string]time.Time // message IDs returned, not yet claimed
	closeErr error                // why the channel closed, once it did
	blocked  string               // why the broker blocked the connection, "" when it does not
}

// connect dials the broker with the configuration's credentials and vhost.
// A refusal (see ConfigRefusal) is Misconfigured, any other failure
// Unavailable. suffix goes after the connection's name in the management
// UI.
func (p *Publisher) connect(suffix string) (*amqp.Connection, error) {
	ac := p.cfg.amqpConfig()
	if name, ok := ac.Properties["connection_name"].(string); ok {
		ac.Properties["connection_name"] = name + suffix
	}
	conn, err := amqp.DialConfig(p.cfg.URL, ac)
	if err != nil {
		return nil, classifyClose(fmt.Errorf("rabbitmq publisher: dial %s: %s", redact.URL(p.cfg.URL), redact.Text(err.Error())), err)
	}
	return conn, nil
}

// dial connects and opens a confirm-mode channel.
func (p *Publisher) dial() (*session, error) {
	conn, err := p.connect("")
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, classifyClose(fmt.Errorf("rabbitmq publisher: open confirm channel: %w", err), err)
	}
	s := &session{
		conn: conn, ch: ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return)),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		blocks:   conn.NotifyBlocked(make(chan amqp.Blocking, 1)),
		barrier:  make(chan chan struct{}),
		shut:     make(chan struct{}),
		exited:   make(chan struct{}),
		returned: map[string]time.Time{},
	}
	go s.run(p.cfg.ConfirmTimeout)
	p.log.Info("rabbitmq publisher connected")
	return s, nil
}

// run records returned messages and the channel's close until the channel
// closes. Returns arrive on an unbuffered channel before the ack of the
// same message, so once a barrier request is answered every return
// preceding an ack already seen is recorded.
func (s *session) run(keep time.Duration) {
	defer close(s.exited)
	for s.returns != nil || s.closes != nil {
		select {
		case b, ok := <-s.blocks:
			s.onBlock(b, ok)
		case r, ok := <-s.returns:
			s.onReturn(r, ok, keep)
		case e, ok := <-s.closes:
			s.onClose(e, ok)
		case reply := <-s.barrier:
			// What is ready now came before the request: take it first.
			for drained := false; !drained; {
				select {
				case r, ok := <-s.returns:
					s.onReturn(r, ok, keep)
				case e, ok := <-s.closes:
					s.onClose(e, ok)
				default:
					drained = true
				}
			}
			close(reply)
		}
	}
}

func (s *session) onBlock(b amqp.Blocking, ok bool) {
	if !ok {
		s.blocks = nil
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked = ""
	if b.Active {
		s.blocked = b.Reason
		if s.blocked == "" {
			s.blocked = "no reason given"
		}
	}
}

func (s *session) onReturn(r amqp.Return, ok bool, keep time.Duration) {
	if !ok {
		s.returns = nil
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if len(s.returned) > 4096 {
		for id, at := range s.returned {
			if now.Sub(at) > 2*keep {
				delete(s.returned, id)
			}
		}
	}
	s.returned[r.MessageId] = now
}

func (s *session) onClose(e *amqp.Error, ok bool) {
	if !ok {
		// amqp091 sends the close's error, then closes the channel.
		s.closes = nil
		close(s.shut)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e != nil {
		s.closeErr = e
	}
}

// sync waits until every return and close received so far is recorded.
func (s *session) sync() {
	reply := make(chan struct{})
	select {
	case s.barrier <- reply:
		<-reply
	case <-s.exited:
	}
}

// awaitClose waits, up to timeout, until the close of a dead session's
// channel is recorded: amqp091 marks a channel closed before it sends the
// reason, so a publish may fail on a closed channel whose reason is not in
// yet.
func (s *session) awaitClose(timeout time.Duration) {
	if !s.dead() {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.shut:
	case <-t.C:
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

// configRefusal is the error with which the broker closed the channel or
// the connection when it refused the configuration (see ConfigRefusal),
// nil otherwise.
func (s *session) configRefusal() *amqp.Error {
	if !s.dead() {
		return nil
	}
	return ConfigRefusal(s.why())
}

// lost is the error of m, whose confirm never came because the channel
// closed: unavailable (Publish then marks it Misconfigured when the close
// was a refusal of the configuration).
func (s *session) lost(m string) error {
	return publishers.Unavailable(fmt.Errorf("rabbitmq publish %s: %w: %w", m, ErrNoChannel, s.why()))
}
