package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/subscribers"
)

// ErrRefused marks an error of Start as Pub/Sub refusing the subscriber's
// configuration: a missing subscription or dead-letter topic, refused
// credentials or permissions. Retrying does not help until the
// configuration is fixed. Such errors are classified
// publishers.Misconfigured too.
var ErrRefused = errors.New("refused by Pub/Sub (missing subscription or topic, credentials or permissions)")

// errExhausted is the dead-letter reason for a message delivered more
// than MaxDeliveries times without a result.
var errExhausted = errors.New("delivered more than MaxDeliveries times without a result (the consumer crashed or stalled)")

// Subscriber consumes a Pub/Sub subscription by streaming pull into an
// inbox. TTx is the inbox's transaction type.
type Subscriber[TTx any] struct {
	cfg       SubscriberConfig
	log       *slog.Logger
	in        *inbox.Inbox[TTx]
	h         inbox.Handler[TTx]
	client    *gpubsub.Client
	ownClient bool

	subName, dlqName string
	source           string // the subscription's topic ID
	dlq              *gpubsub.Publisher

	lc      *consumer.Lifecycle
	receive context.CancelFunc

	flow     sync.Mutex
	stopping bool          // Stop was called: new deliveries go back
	inflight int           // deliveries being handled
	idle     chan struct{} // closed when inflight falls to 0 while stopping

	mu         sync.Mutex
	deliveries map[string]int       // Pub/Sub message ID → deliveries seen here
	failedKey  map[string]keyFailed // ordering key → its failed head
}

// keyFailed is an ordering key whose message id failed and was handed
// back: the key's later messages are handed back unhandled until id comes
// again (or until, having gone to another instance, it is overdue).
type keyFailed struct {
	id    string
	until time.Time
}

var _ subscribers.Subscriber = (*Subscriber[any])(nil)

// NewSubscriber returns a Subscriber that handles the messages of
// cfg.Subscription with h through in. cfg is required. It makes a client
// unless cfg.Client is set, and does not talk to Pub/Sub until Start.
func NewSubscriber[TTx any](ctx context.Context, in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	if cfg == nil {
		return nil, errors.New("pubsub subscriber config: nil: Subscription and DeadLetterTopic are required")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if in == nil || h == nil {
		return nil, errors.New("pubsub subscriber: nil inbox or handler")
	}
	s := &Subscriber[TTx]{cfg: c, in: in, h: consumer.Safe(h), client: c.Client,
		subName:    fullName(c.Project, "subscriptions", c.Subscription),
		dlqName:    fullName(c.Project, "topics", c.DeadLetterTopic),
		lc:         consumer.NewLifecycle("pubsub subscriber"),
		deliveries: map[string]int{}, failedKey: map[string]keyFailed{}}
	s.log = c.Logger.With("subscription", s.subName)
	if s.client == nil {
		client, err := newClient(ctx, c.Project, c.ClientOptions)
		if err != nil {
			return nil, err
		}
		s.client, s.ownClient = client, true
	}
	return s, nil
}

// Start checks that the subscription and the dead-letter topic exist (a
// refusal wraps ErrRefused) and starts the streaming pull. It may be
// called once.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error {
		if err := s.check(ctx); err != nil {
			if s.ownClient {
				_ = s.client.Close()
			}
			return err
		}
		s.dlq = s.client.Publisher(s.dlqName)
		s.dlq.PublishSettings.DelayThreshold = delayThreshold
		s.dlq.PublishSettings.Timeout = s.cfg.OpTimeout
		sub := s.client.Subscriber(s.subName)
		sub.ReceiveSettings.MaxOutstandingMessages = s.cfg.Concurrency
		sub.ReceiveSettings.NumGoroutines = 1
		// A lost acknowledgement (a connection cut) holds the message, and
		// with ordering its key, for the lease: keep leases short.
		sub.ReceiveSettings.MaxDurationPerAckExtension = maxLease
		rctx, cancel := context.WithCancel(context.Background())
		s.receive = cancel
		go s.run(rctx, sub)
		return nil
	})
}

// check fetches the subscription and the dead-letter topic.
func (s *Subscriber[TTx]) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	sub, err := s.client.SubscriptionAdminClient.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: s.subName})
	if err != nil {
		return s.startError("subscription "+s.subName, err)
	}
	if sub.GetTopic() == s.dlqName {
		return fmt.Errorf("pubsub subscriber: %w: DeadLetterTopic %s is the subscription's own topic", ErrRefused, s.dlqName)
	}
	s.source = lastSegment(sub.GetTopic())
	if _, err := s.client.TopicAdminClient.GetTopic(ctx, &pb.GetTopicRequest{Topic: s.dlqName}); err != nil {
		return s.startError("dead-letter topic "+s.dlqName, err)
	}
	return nil
}

func (s *Subscriber[TTx]) startError(what string, err error) error {
	err = classify(fmt.Errorf("get %s: %w", what, err))
	if publishers.IsMisconfigured(err) {
		return fmt.Errorf("pubsub subscriber: %w: %w", ErrRefused, err)
	}
	return fmt.Errorf("pubsub subscriber: %w", err)
}

// run runs the streaming pull until Stop, starting it again when it ends
// with an error (the client retries what it can by itself), then stops
// the dead-letter publisher and closes the client it made.
func (s *Subscriber[TTx]) run(ctx context.Context, sub *gpubsub.Subscriber) {
	defer s.lc.Done()
	closeClient := sync.OnceFunc(func() {
		if s.ownClient {
			_ = s.client.Close()
		}
	})
	defer closeClient()
	defer s.dlq.Stop()
	for {
		err := s.receiveOnce(ctx, sub, closeClient)
		if ctx.Err() != nil {
			return
		}
		level := slog.LevelWarn
		if publishers.IsMisconfigured(classify(err)) {
			level = slog.LevelError
		}
		s.log.Log(context.Background(), level, "pubsub subscriber: streaming pull ended; starting again", "err", err)
		if !s.lc.Wait(time.Second) {
			return
		}
	}
}

// maxLease bounds each lease the client takes on a message (it renews
// them while the handler runs): how long a message whose acknowledgement
// was lost waits before it comes again.
const maxLease = 10 * time.Second

// stopFlush is how long a stopping Subscriber lets the client send its
// last acknowledgements before it closes the client's connection (which
// it does only to a client it made): the client retries them as long as
// Pub/Sub is unreachable.
const stopFlush = 2 * time.Second

// receiveOnce runs one streaming pull until it ends or, once ctx ends,
// for at most stopFlush, closing the client then (a hard Stop too lets
// the client send what its handlers handed back).
func (s *Subscriber[TTx]) receiveOnce(ctx context.Context, sub *gpubsub.Subscriber, closeClient func()) error {
	done := make(chan error, 1)
	go func() { done <- sub.Receive(ctx, s.onMessage) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.log.Debug("pubsub subscriber: stopping the streaming pull")
	t := time.NewTimer(stopFlush)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	if s.ownClient {
		s.log.Warn("pubsub subscriber: the last acknowledgements were not sent in time; closing the connection (their messages come again, and the inbox drops them)")
		closeClient()
	}
	err := <-done
	s.log.Debug("pubsub subscriber: streaming pull stopped", "err", err)
	return err
}

// Stop stops the streaming pull and waits for in-flight handlers to
// finish and their messages to be settled. When ctx ends first it cancels
// the handlers' context, waits for them to return and returns ctx's
// error; their messages are handed back (nacked), uncounted. Stop before
// Start, or twice, is a no-op.
//
// The streaming pull is stopped only once the in-flight handlers have
// returned: what the client delivers meanwhile is handed back at once,
// while the client can still say so to Pub/Sub.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	return s.lc.Stop(ctx, s.halt)
}

// halt stops the streaming pull once no handler runs.
func (s *Subscriber[TTx]) halt() {
	s.log.Debug("pubsub subscriber: stopping")
	s.flow.Lock()
	defer s.flow.Unlock()
	s.stopping = true
	if s.receive == nil {
		return
	}
	if s.inflight == 0 {
		s.receive()
		return
	}
	idle := make(chan struct{})
	s.idle = idle
	go func() { <-idle; s.receive() }()
}

// enter counts a delivery in flight; false once stopping.
func (s *Subscriber[TTx]) enter() bool {
	s.flow.Lock()
	defer s.flow.Unlock()
	if s.stopping {
		return false
	}
	s.inflight++
	return true
}

// leave ends a delivery entered.
func (s *Subscriber[TTx]) leave() {
	s.flow.Lock()
	defer s.flow.Unlock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers SubscriberConfig.ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

// onMessage handles one delivery and settles it.
func (s *Subscriber[TTx]) onMessage(_ context.Context, m *gpubsub.Message) {
	if !s.enter() { // delivered after Stop: not started, left to the broker
		m.Nack()
		return
	}
	defer s.leave()
	if s.behindFailed(m) {
		m.Nack()
		return
	}
	delivery := s.delivery(m, 1)
	st := subscribers.Settlement{Source: s.source, Delivery: delivery}
	msg, err := Decode(m, strings.TrimPrefix(s.source, s.cfg.TopicPrefix), delivery)
	st.Message = msg
	r := consumer.Handle(s.lc.Context(), s.in, s.h, msg, err, delivery, s.cfg.MaxDeliveries, errExhausted)
	st.Outcome, st.Err = r.Outcome, r.Err
	switch r.Action {
	case subscribers.ActionAck:
		if s.cfg.Hooks.AfterCommit != nil {
			s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
		}
		st.Action = subscribers.ActionAck
		s.settled(m)
		m.Ack()
	case subscribers.ActionRelease:
		st.Action = subscribers.ActionRelease
		s.delivery(m, -1) // uncounted
		m.Nack()
	case subscribers.ActionDeadLetter:
		s.deadLetter(m, &st, r.Err)
	case subscribers.ActionRetry:
		s.retry(m, &st)
	}
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
}

// delivery adds d to the deliveries of m seen here and returns them: the
// Pub/Sub delivery attempt where the subscription has a dead-letter policy
// (Pub/Sub counts only then), this instance's own count otherwise.
func (s *Subscriber[TTx]) delivery(m *gpubsub.Message, d int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries[m.ID] += d
	if m.DeliveryAttempt != nil {
		return *m.DeliveryAttempt
	}
	return s.deliveries[m.ID]
}

// settled forgets m (acknowledged or dead-lettered) and lets its key go
// on.
func (s *Subscriber[TTx]) settled(m *gpubsub.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.deliveries, m.ID)
	if f, ok := s.failedKey[m.OrderingKey]; ok && f.id == m.ID {
		delete(s.failedKey, m.OrderingKey)
	}
}

// behindFailed reports whether m comes after its key's failed head,
// which was handed back and has not come again: Pub/Sub redelivers the
// head and then the key's later messages, but the client may hand the
// later ones to the handler first. Handling one of them now would break
// the key's order.
func (s *Subscriber[TTx]) behindFailed(m *gpubsub.Message) bool {
	if m.OrderingKey == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.failedKey[m.OrderingKey]
	switch {
	case !ok || f.id == m.ID:
		return false
	case time.Now().After(f.until): // the head went elsewhere
		delete(s.failedKey, m.OrderingKey)
		return false
	}
	return true
}

// retry waits out the backoff, holding the message (the client extends its
// deadline), then hands it back for redelivery; on Stop it hands it back
// at once.
func (s *Subscriber[TTx]) retry(m *gpubsub.Message, st *subscribers.Settlement) {
	st.Action = subscribers.ActionRetry
	st.Delay = min(s.cfg.Backoff.Delay(st.Delivery), s.cfg.Backoff.Max)
	s.log.Info("pubsub subscriber: handler failed; retrying", "id", st.Message.ID, "message", m.ID,
		"delivery", st.Delivery, "delay", st.Delay, "err", st.Err)
	if m.OrderingKey != "" {
		s.mu.Lock()
		s.failedKey[m.OrderingKey] = keyFailed{id: m.ID, until: time.Now().Add(st.Delay + time.Minute)}
		s.mu.Unlock()
	}
	s.lc.Wait(st.Delay)
	m.Nack()
}

// deadLetter publishes the message to the dead-letter topic, then acks
// it. When the publish fails the message is retried, to be dead-lettered
// at its next delivery; a lost ack may dead-letter it twice.
func (s *Subscriber[TTx]) deadLetter(m *gpubsub.Message, st *subscribers.Settlement, cause error) {
	st.Err = cause
	attrs := make(map[string]string, len(m.Attributes)+4)
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	msg := cause.Error()
	if len(msg) > MaxAttributeValueBytes {
		msg = msg[:MaxAttributeValueBytes]
	}
	msg = strings.ToValidUTF8(msg, "")
	attrs[AttrError] = msg
	attrs[AttrDeadTopic] = s.source
	attrs[AttrDeadSubscription] = s.subName
	attrs[AttrDeadMessageID] = m.ID
	attrs[AttrDeadDeliveries] = strconv.Itoa(st.Delivery)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	if _, err := s.dlq.Publish(ctx, &gpubsub.Message{Data: m.Data, Attributes: attrs}).Get(ctx); err != nil {
		s.log.Error("pubsub subscriber: dead-letter publish failed; retrying", "id", st.Message.ID, "topic", s.dlqName, "err", err)
		st.Err = fmt.Errorf("%w (and the dead-letter publish failed: %w)", cause, err)
		s.retry(m, st)
		return
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("pubsub subscriber: dead-lettered", "id", st.Message.ID, "delivery", st.Delivery, "topic", s.dlqName, "err", cause)
	s.settled(m)
	m.Ack()
}
