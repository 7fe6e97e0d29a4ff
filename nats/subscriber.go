package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/subscribers"
)

// Subscriber consumes a durable JetStream pull consumer into an inbox. TTx
// is the inbox's transaction type.
type Subscriber[TTx any] struct {
	js  jetstream.JetStream
	in  *inbox.Inbox[TTx]
	h   inbox.Handler[TTx]
	cfg SubscriberConfig
	log *slog.Logger

	lc   *consumer.Lifecycle // Stopping: fetch no more; Done: the reader, every worker and watch have returned
	iter jetstream.MessagesContext

	// gone ends when Stop gives up on the server: the connection is down
	// while stopping, or Stop's context ended (see Stop and abandon).
	gone   context.Context
	giveUp context.CancelFunc
}

// errExhausted is the dead-letter reason for a message delivered more than
// MaxDeliveries times without a result (its consumer crashed or stalled).
var errExhausted = errors.New("delivered more than MaxDeliveries times without a result (the consumer crashed or stalled)")

var _ subscribers.Subscriber = (*Subscriber[any])(nil)

// NewSubscriber returns a Subscriber that handles the messages of
// cfg.Durable with h through in, on js (the caller's connection, which it
// leaves open). It does not talk to the server until Start.
func NewSubscriber[TTx any](js jetstream.JetStream, in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if js == nil || in == nil || h == nil {
		return nil, errors.New("nats subscriber: nil JetStream, inbox or handler")
	}
	gone, giveUp := context.WithCancel(context.Background())
	return &Subscriber[TTx]{js: js, in: in, h: consumer.Safe(h), cfg: c,
		log: c.Logger.With("stream", c.Stream, "consumer", c.Durable), lc: consumer.NewLifecycle("nats subscriber"),
		gone: gone, giveUp: giveUp}, nil
}

// ConsumerConfig is the durable consumer Start creates or updates.
func (s *Subscriber[TTx]) ConsumerConfig() jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:       s.cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       s.cfg.AckWait,
		// Deliveries are counted by the subscriber (see the package doc).
		// The server refuses a BackOff with an unlimited MaxDeliver, so
		// redeliveries after a timeout come every AckWait, and NakWithDelay
		// spaces those after a failure.
		MaxDeliver:    -1,
		MaxAckPending: s.cfg.MaxAckPending,
	}
	if len(s.cfg.FilterSubjects) == 1 {
		cc.FilterSubject = s.cfg.FilterSubjects[0] // understood by servers before 2.10 too
	} else {
		cc.FilterSubjects = s.cfg.FilterSubjects
	}
	return cc
}

// Start checks that JetStream is enabled for the connection's account and
// that a stream captures the dead-letter subject, creates or updates the
// durable consumer and starts handling messages. It fails at once, saying
// so, when the server refuses JetStream to the account. It may be called
// once.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error { return s.start(ctx) })
}

func (s *Subscriber[TTx]) start(ctx context.Context) error {
	if _, err := s.js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			return fmt.Errorf("nats subscriber: the server refuses JetStream to this account (enable JetStream for it, or connect as a user of an account that has it): %w", err)
		}
		return fmt.Errorf("nats subscriber: JetStream account info: %w", err)
	}
	dlStream, err := s.js.StreamNameBySubject(ctx, s.cfg.DeadLetterSubject)
	if err != nil {
		return fmt.Errorf("nats subscriber: no stream captures the dead-letter subject %q (create one): %w", s.cfg.DeadLetterSubject, err)
	}
	if dlStream == s.cfg.Stream && s.reads(s.cfg.DeadLetterSubject) {
		return fmt.Errorf("nats subscriber: dead-letter subject %q is one this consumer reads", s.cfg.DeadLetterSubject)
	}
	cons, err := s.js.CreateOrUpdateConsumer(ctx, s.cfg.Stream, s.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("nats subscriber: consumer %s on %s: %w", s.cfg.Durable, s.cfg.Stream, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(s.cfg.Concurrency))
	if err != nil {
		return fmt.Errorf("nats subscriber: consume %s: %w", s.cfg.Durable, err)
	}
	s.iter = iter
	// Registered before the first look at the connection's status in
	// Stop, so that no change after it goes unseen.
	status := s.js.Conn().StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)

	work := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	wg.Go(func() { s.read(work) })
	for range s.cfg.Concurrency {
		wg.Go(func() {
			for m := range work {
				s.process(m)
			}
		})
	}
	finished := make(chan struct{})
	go func() {
		wg.Wait()
		close(finished)
	}()
	go func() {
		s.watch(status, finished)
		s.lc.Done()
	}()
	return nil
}

// reads reports whether the consumer's filter covers subject.
func (s *Subscriber[TTx]) reads(subject string) bool {
	if len(s.cfg.FilterSubjects) == 0 {
		return true
	}
	for _, f := range s.cfg.FilterSubjects {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// read hands fetched messages to the workers until Stop drains the iterator
// (or gives up on the server); what it fetches after Stop it hands back to
// the server.
func (s *Subscriber[TTx]) read(work chan<- jetstream.Msg) {
	defer close(work)
	for {
		m, err := s.iter.Next(jetstream.NextContext(s.gone))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || s.gone.Err() != nil {
				return
			}
			s.log.Warn("nats subscriber: fetch", "err", err)
			s.lc.Wait(100 * time.Millisecond) // don't spin on a persistent error; Stop ends it
			continue
		}
		if s.lc.Stopped() {
			_ = m.Nak()
			continue
		}
		select {
		case work <- m:
		case <-s.lc.Stopping():
			_ = m.Nak()
		}
	}
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers Options.ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

// process handles one delivery and settles it.
func (s *Subscriber[TTx]) process(m jetstream.Msg) {
	ctx := s.lc.Context()
	st := subscribers.Settlement{Source: m.Subject()}
	md, err := m.Metadata()
	if err != nil {
		s.log.Error("nats subscriber: not a JetStream message", "subject", m.Subject(), "err", err)
		_ = m.Term()
		return
	}
	st.Delivery = int(md.NumDelivered)
	msg, err := Decode(m, s.cfg.SubjectPrefix)
	st.Message = msg
	stop := func() {}
	if err == nil {
		stop = s.heartbeat(m)
	}
	r := consumer.Handle(ctx, s.in, s.h, msg, err, st.Delivery, s.cfg.MaxDeliveries, errExhausted)
	stop()
	st.Outcome, st.Err = r.Outcome, r.Err
	switch r.Action {
	case subscribers.ActionAck:
		s.ack(ctx, m, &st)
	case subscribers.ActionRelease: // a hard Stop cut the handler short: not its fault
		st.Action = subscribers.ActionRelease
		_ = m.Nak()
	case subscribers.ActionDeadLetter:
		s.deadLetter(ctx, m, md, &st, r.Err)
	case subscribers.ActionRetry:
		s.nak(m, &st)
	}
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
}

// heartbeat tells the server the message is in progress every AckWait/2
// until the returned stop is called.
func (s *Subscriber[TTx]) heartbeat(m jetstream.Msg) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.AckWait / 2)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// ack acknowledges a committed (or duplicate) message and waits for the
// server's confirmation, so a graceful Stop leaves nothing to redeliver. A
// lost ack costs a redelivery, which the inbox drops as a duplicate.
func (s *Subscriber[TTx]) ack(ctx context.Context, m jetstream.Msg, st *subscribers.Settlement) {
	if s.cfg.Hooks.AfterCommit != nil {
		s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
	}
	st.Action = subscribers.ActionAck
	actx, cancel := s.serverContext(ctx)
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		s.log.Warn("nats subscriber: ack not confirmed; the redelivery will be a duplicate", "id", st.Message.ID, "err", err)
	}
}

// nak hands a failed message back for redelivery after the backoff.
func (s *Subscriber[TTx]) nak(m jetstream.Msg, st *subscribers.Settlement) {
	st.Action = subscribers.ActionRetry
	st.Delay = s.cfg.Backoff.Delay(st.Delivery)
	s.log.Info("nats subscriber: handler failed; redelivering", "id", st.Message.ID, "delivery", st.Delivery, "delay", st.Delay, "err", st.Err)
	if err := m.NakWithDelay(st.Delay); err != nil {
		s.log.Warn("nats subscriber: nak", "id", st.Message.ID, "err", err)
	}
}

// deadLetter publishes the message to the dead-letter subject and
// acknowledges it. When the publish fails the message is handed back, to be
// dead-lettered on its next delivery.
func (s *Subscriber[TTx]) deadLetter(ctx context.Context, m jetstream.Msg, md *jetstream.MsgMetadata, st *subscribers.Settlement, cause error) {
	st.Err = cause
	dl := deadLetterMsg(s.cfg.DeadLetterSubject, m, md, s.cfg.Durable, cause)
	// The dedup ID makes a repeated dead-lettering (the Term was lost) a
	// no-op within the dead-letter stream's duplicate window.
	dedup := fmt.Sprintf("%s/%s/%d", md.Stream, s.cfg.Durable, md.Sequence.Stream)
	pctx, cancel := s.serverContext(ctx)
	defer cancel()
	if _, err := s.js.PublishMsg(pctx, dl, jetstream.WithMsgID(dedup)); err != nil {
		s.log.Error("nats subscriber: dead-letter publish failed; redelivering", "id", st.Message.ID, "err", err)
		st.Err = fmt.Errorf("%w (and the dead-letter publish failed: %w)", cause, err)
		s.nak(m, st)
		return
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("nats subscriber: dead-lettered", "id", st.Message.ID, "delivery", st.Delivery, "subject", s.cfg.DeadLetterSubject, "err", cause)
	// Acknowledged, not terminated: the ack is confirmed by the server (a
	// Term is not), and a server before 2.10 leaves a Term with a reason
	// pending. The dead letter is the record of what happened.
	actx, cancel2 := s.serverContext(ctx)
	defer cancel2()
	if err := m.DoubleAck(actx); err != nil {
		s.log.Warn("nats subscriber: ack of a dead letter not confirmed", "id", st.Message.ID, "err", err)
	}
}
