package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/subscribers"
)

// Subscriber consumes a RabbitMQ queue into an inbox. TTx is the inbox's
// transaction type.
type Subscriber[TTx any] struct {
	in  *inbox.Inbox[TTx]
	h   inbox.Handler[TTx]
	cfg SubscriberConfig
	log *slog.Logger
	lc  *consumer.Lifecycle // Done: the run loop has returned
}

// errExhausted is the dead-letter reason for a message delivered more than
// MaxDeliveries times without a result (its consumer died).
var errExhausted = errors.New("delivered more than MaxDeliveries times without a result (the consumer died)")

// NewSubscriber returns a Subscriber that handles the messages of
// cfg.Queue with h through in. cfg is required (it names the queue and the
// dead-letter destination). It does not connect until Start.
func NewSubscriber[TTx any](in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if in == nil || h == nil {
		return nil, errors.New("rabbitmq subscriber: nil inbox or handler")
	}
	return &Subscriber[TTx]{in: in, h: consumer.Safe(h), cfg: c,
		log: c.Logger.With("queue", c.Queue, "url", redact.URL(c.URL)), lc: consumer.NewLifecycle("rabbitmq subscriber")}, nil
}

var _ subscribers.Subscriber = (*Subscriber[struct{}])(nil)

// subSession is one connection of the subscriber: a consuming channel
// and a confirming channel for republishes and dead letters.
type subSession struct {
	conn       *amqp.Connection
	ch, pub    *amqp.Channel
	deliveries <-chan amqp.Delivery
	tag        string
}

// connect dials, runs Setup, and starts consuming.
func (s *Subscriber[TTx]) connect() (*subSession, error) {
	conn, err := amqp.DialConfig(s.cfg.URL, dialConfig(s.cfg.AMQP, s.cfg.DialTimeout))
	if err != nil {
		msg := fmt.Sprintf("dial %s: %s", redact.URL(s.cfg.URL), redact.Text(err.Error()))
		if ConfigRefusal(err) != nil {
			return nil, fmt.Errorf("rabbitmq subscriber: %w: %s", ErrConfigRefused, msg)
		}
		return nil, fmt.Errorf("rabbitmq subscriber: %s", msg)
	}
	sess := &subSession{conn: conn, tag: fmt.Sprintf("outbox-%p", s)}
	fail := func(what string, err error) (*subSession, error) {
		_ = conn.Close()
		if ConfigRefusal(err) != nil {
			return nil, fmt.Errorf("rabbitmq subscriber: %w: %s: %w", ErrConfigRefused, what, err)
		}
		return nil, fmt.Errorf("rabbitmq subscriber: %s: %w", what, err)
	}
	if sess.ch, err = conn.Channel(); err != nil {
		return fail("channel", err)
	}
	if s.cfg.Setup != nil {
		if err := s.cfg.Setup(sess.ch); err != nil {
			return fail("setup", err)
		}
	}
	if _, err := sess.ch.QueueDeclarePassive(s.cfg.Queue, false, false, false, false, nil); err != nil {
		// A passive declare of a queue with other flags still succeeds; a
		// missing queue closes the channel.
		return fail("queue "+s.cfg.Queue, err)
	}
	if err := sess.ch.Qos(s.cfg.Concurrency, 0, false); err != nil {
		return fail("qos", err)
	}
	if sess.pub, err = conn.Channel(); err == nil {
		err = sess.pub.Confirm(false)
	}
	if err != nil {
		return fail("confirm channel", err)
	}
	if sess.deliveries, err = sess.ch.Consume(s.cfg.Queue, sess.tag, false, false, false, false, nil); err != nil {
		return fail("consume", err)
	}
	return sess, nil
}

// Start connects, runs Setup, checks the queue and starts consuming; after
// that the subscriber reconnects by itself. It may be called once. It
// fails at once, without retrying, when the broker cannot be reached or
// refuses the subscriber; a refusal of the configuration (credentials,
// vhost, queue, permissions) wraps ErrConfigRefused.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sess, err := s.connect()
		if err != nil {
			return err
		}
		go s.run(sess)
		return nil
	})
}

// run serves sessions until Stop, reconnecting when one drops.
func (s *Subscriber[TTx]) run(sess *subSession) {
	defer s.lc.Done()
	delay := s.cfg.ReconnectDelay
	for {
		if sess != nil {
			s.serve(sess)
			_ = sess.conn.Close()
			delay = s.cfg.ReconnectDelay
		}
		if s.lc.Stopped() || !s.lc.Wait(delay) {
			return
		}
		var err error
		if sess, err = s.connect(); err != nil {
			if errors.Is(err, ErrConfigRefused) {
				s.log.Error("rabbitmq subscriber: reconnect refused; retrying until the configuration is fixed", "err", err, "retry_in", delay)
			} else {
				s.log.Warn("rabbitmq subscriber: reconnect failed", "err", err, "retry_in", delay)
			}
			delay = min(2*delay, maxReconnectDelay)
		}
	}
}

// serve runs Concurrency workers on the session's deliveries until the
// channel closes: on Stop (the consumer is cancelled) or a dropped
// connection.
func (s *Subscriber[TTx]) serve(sess *subSession) {
	var wg sync.WaitGroup
	for range s.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range sess.deliveries {
				if s.lc.Stopped() {
					_ = d.Nack(false, true)
					continue
				}
				s.process(sess, d)
			}
		}()
	}
	served := make(chan struct{})
	go func() {
		select {
		case <-s.lc.Stopping():
			if err := sess.ch.Cancel(sess.tag, false); err != nil {
				_ = sess.conn.Close()
			}
		case <-served:
		}
	}()
	wg.Wait()
	close(served)
	if !s.lc.Stopped() {
		s.log.Warn("rabbitmq subscriber: lost the connection; reconnecting")
	}
}

// Stop cancels the consumer, lets in-flight handlers finish and
// acknowledges their messages; messages delivered but not started are
// handed back. When ctx ends first it cancels the handlers' context (their
// messages are handed back), waits for them and returns ctx's error. Stop
// before Start, or twice, is a no-op.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	return s.lc.Stop(ctx, nil)
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

// process handles one delivery and settles it.
func (s *Subscriber[TTx]) process(sess *subSession, d amqp.Delivery) {
	_, rk := origin(d)
	st := subscribers.Settlement{Source: rk, Delivery: Deliveries(d)}
	msg, err := Decode(d, s.cfg.RoutingKeyPrefix)
	st.Message = msg
	r := consumer.Handle(s.lc.Context(), s.in, s.h, msg, err, st.Delivery, s.cfg.MaxDeliveries, errExhausted)
	st.Outcome, st.Err = r.Outcome, r.Err
	switch r.Action {
	case subscribers.ActionAck:
		s.ack(d, &st)
	case subscribers.ActionRelease:
		s.release(d, &st)
	case subscribers.ActionDeadLetter:
		s.deadLetter(sess, d, &st, r.Err)
	case subscribers.ActionRetry:
		s.retry(sess, d, &st)
	}
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
}

// ack acknowledges a committed (or duplicate) message. A lost ack (the
// connection dropped) makes the broker deliver it again: a duplicate.
func (s *Subscriber[TTx]) ack(d amqp.Delivery, st *subscribers.Settlement) {
	if s.cfg.Hooks.AfterCommit != nil {
		s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
	}
	st.Action = subscribers.ActionAck
	if err := d.Ack(false); err != nil {
		s.log.Warn("rabbitmq subscriber: ack failed; the redelivery will be a duplicate", "id", st.Message.ID, "err", err)
	}
}

func (s *Subscriber[TTx]) release(d amqp.Delivery, st *subscribers.Settlement) {
	st.Action = subscribers.ActionRelease
	if err := d.Nack(false, true); err != nil {
		s.log.Warn("rabbitmq subscriber: nack", "id", st.Message.ID, "err", err)
	}
}

// publish publishes p and waits for the broker's confirmation.
func (s *Subscriber[TTx]) publish(sess *subSession, exchange, key string, p amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConfirmTimeout)
	defer cancel()
	conf, err := sess.pub.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, p)
	if err != nil {
		return err
	}
	ok, err := conf.WaitContext(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return ErrNacked
	}
	return nil
}

// retry waits the backoff, then republishes the message to the queue with
// its delivery count incremented and acknowledges the original. A Stop
// during the wait, or a failed republish, hands the message back instead.
func (s *Subscriber[TTx]) retry(sess *subSession, d amqp.Delivery, st *subscribers.Settlement) {
	st.Delay = s.cfg.Backoff.Delay(st.Delivery)
	s.log.Info("rabbitmq subscriber: handler failed; retrying", "id", st.Message.ID, "delivery", st.Delivery, "delay", st.Delay, "err", st.Err)
	if !s.lc.Wait(st.Delay) {
		s.release(d, st)
		return
	}
	if err := s.publish(sess, "", s.cfg.Queue, retryMsg(d, st.Delivery)); err != nil {
		s.log.Warn("rabbitmq subscriber: republish failed; requeueing", "id", st.Message.ID, "err", err)
		s.release(d, st)
		return
	}
	st.Action = subscribers.ActionRetry
	if err := d.Ack(false); err != nil {
		s.log.Warn("rabbitmq subscriber: ack of a republished message failed", "id", st.Message.ID, "err", err)
	}
}

// deadLetter publishes the message to the dead-letter destination and
// acknowledges it. When the publish fails it is handed back.
func (s *Subscriber[TTx]) deadLetter(sess *subSession, d amqp.Delivery, st *subscribers.Settlement, cause error) {
	st.Err = cause
	if err := s.publish(sess, s.cfg.DeadLetterExchange, s.cfg.DeadLetterRoutingKey, deadLetterMsg(d, s.cfg.Queue, st.Delivery, cause)); err != nil {
		s.log.Error("rabbitmq subscriber: dead-letter publish failed; requeueing", "id", st.Message.ID, "err", err)
		st.Err = fmt.Errorf("%w (and the dead-letter publish failed: %w)", cause, err)
		s.release(d, st)
		return
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("rabbitmq subscriber: dead-lettered", "id", st.Message.ID, "delivery", st.Delivery, "err", cause)
	if err := d.Ack(false); err != nil {
		s.log.Warn("rabbitmq subscriber: ack of a dead letter failed", "id", st.Message.ID, "err", err)
	}
}
