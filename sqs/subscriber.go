package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/subscribers"
)

// SubscriberConfig configures a Subscriber. Queue and DeadLetterQueue are
// required; zero means the default for every other field.
type SubscriberConfig struct {
	subscribers.Options

	// Queue is the name of the queue to consume (the Publisher writes
	// topic T to QueuePrefix+T, .fifo added for a FIFO queue). Required.
	Queue string
	// DeadLetterQueue is the name of the queue that receives the messages
	// that failed MaxDeliveries times, failed permanently or could not be
	// decoded (see the package documentation for what it carries). A FIFO
	// queue's must be FIFO too. It must not be Queue. Required.
	DeadLetterQueue string
	// Account owns both queues, when not the credentials' account.
	Account string
	// Topic is inbox.Message.Topic. Default: Queue less QueuePrefix and
	// less .fifo.
	Topic string
	// QueuePrefix is stripped from Queue to give the default Topic.
	QueuePrefix string

	// VisibilityTimeout is how long a received message stays hidden from
	// other consumers: the time a crashed consumer's messages wait before
	// another gets them. While a handler runs, its message's visibility is
	// extended every VisibilityTimeout/3. Whole seconds, 1 s to 12 h.
	// Default DefaultVisibilityTimeout (30 s).
	VisibilityTimeout time.Duration
	// WaitTime is ReceiveMessage's long poll (WaitTimeSeconds). Whole
	// seconds, 0 to 20 s; Stop interrupts it. Default DefaultWaitTime (20 s).
	WaitTime time.Duration
	// OpTimeout bounds each call but the long poll. Default
	// DefaultOpTimeout (10 s).
	OpTimeout time.Duration
}

// Defaults of SubscriberConfig; those of its Options are subscribers'.
const (
	DefaultVisibilityTimeout = 30 * time.Second
	DefaultWaitTime          = 20 * time.Second
	DefaultOpTimeout         = 10 * time.Second
)

// WithDefaults returns a copy of c with every zero field set to its
// default, the embedded Options' included.
func (c SubscriberConfig) WithDefaults() SubscriberConfig {
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.WaitTime == 0 {
		c.WaitTime = DefaultWaitTime
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.Topic == "" {
		c.Topic = strings.TrimSuffix(strings.TrimPrefix(c.Queue, c.QueuePrefix), ".fifo")
	}
	c.Options = c.Options.WithDefaults()
	return c
}

// Validate reports what NewSubscriber refuses in c, each field by name.
func (c *SubscriberConfig) Validate() error { return c.WithDefaults().validate() }

func (c SubscriberConfig) validate() error {
	var errs []error
	if err := c.Options.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case c.Queue == "":
		errs = append(errs, errors.New("Queue is required"))
	case !validQueueName(c.Queue):
		errs = append(errs, fmt.Errorf("Queue %q: %w", c.Queue, ErrBadQueueName))
	}
	switch {
	case c.DeadLetterQueue == "":
		errs = append(errs, errors.New("DeadLetterQueue is required"))
	case !validQueueName(c.DeadLetterQueue):
		errs = append(errs, fmt.Errorf("DeadLetterQueue %q: %w", c.DeadLetterQueue, ErrBadQueueName))
	case c.DeadLetterQueue == c.Queue:
		errs = append(errs, fmt.Errorf("DeadLetterQueue %q is Queue", c.DeadLetterQueue))
	case isFIFO(c.Queue) && !isFIFO(c.DeadLetterQueue):
		errs = append(errs, fmt.Errorf("DeadLetterQueue %q: a FIFO queue's dead letters go to a FIFO queue", c.DeadLetterQueue))
	}
	if c.Account != "" && !accountID(c.Account) {
		errs = append(errs, fmt.Errorf("Account %q: want 12 digits", c.Account))
	}
	if c.VisibilityTimeout < time.Second || c.VisibilityTimeout > 12*time.Hour || c.VisibilityTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("VisibilityTimeout %v: want whole seconds from 1s to 12h", c.VisibilityTimeout))
	}
	if c.WaitTime < 0 || c.WaitTime > 20*time.Second || c.WaitTime%time.Second != 0 {
		errs = append(errs, fmt.Errorf("WaitTime %v: want whole seconds from 0 to 20s", c.WaitTime))
	}
	if c.OpTimeout < 0 {
		errs = append(errs, fmt.Errorf("OpTimeout %v: must not be negative", c.OpTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqs subscriber config: %w", err)
	}
	return nil
}

// ErrRefused marks an error of Start as SQS refusing the subscriber's
// configuration: the credentials, their permissions, a queue that does
// not exist.
var ErrRefused = errors.New("refused by SQS (credentials, permissions or queue)")

// errExhausted is the dead-letter reason for a message delivered more than
// MaxDeliveries times without a result (its consumer crashed or stalled).
var errExhausted = errors.New("delivered more than MaxDeliveries times without a result (the consumer crashed or stalled)")

// Subscriber consumes an SQS queue into an inbox. TTx is the inbox's
// transaction type.
type Subscriber[TTx any] struct {
	client *sqs.Client
	in     *inbox.Inbox[TTx]
	h      inbox.Handler[TTx]
	cfg    SubscriberConfig
	log    *slog.Logger
	fifo   bool

	queueURL, dlqURL string

	slots chan struct{}
	lc    *consumer.Lifecycle
	wg    sync.WaitGroup
	// pollCtx ends the long poll at Stop.
	pollCtx    context.Context
	pollCancel context.CancelFunc
}

var _ subscribers.Subscriber = (*Subscriber[any])(nil)

// NewSubscriber returns a Subscriber that handles the messages of
// cfg.Queue with h through in, receiving them with client. It does not
// call SQS until Start. The client stays the caller's.
func NewSubscriber[TTx any](client *sqs.Client, in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	if cfg == nil {
		return nil, errors.New("sqs subscriber config: nil: Queue and DeadLetterQueue are required")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if client == nil || in == nil || h == nil {
		return nil, errors.New("sqs subscriber: nil client, inbox or handler")
	}
	s := &Subscriber[TTx]{client: client, in: in, h: consumer.Safe(h), cfg: c, fifo: isFIFO(c.Queue),
		log:   c.Logger.With("queue", c.Queue),
		slots: make(chan struct{}, c.Concurrency), lc: consumer.NewLifecycle("sqs subscriber")}
	s.pollCtx, s.pollCancel = context.WithCancel(context.Background())
	return s, nil
}

// Start resolves both queues' URLs (GetQueueUrl, which proves the
// credentials and that the queues exist) and starts receiving. It may be
// called once. A refusal wraps ErrRefused.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error {
		var err error
		if s.queueURL, err = s.resolve(ctx, s.cfg.Queue); err != nil {
			return err
		}
		if s.dlqURL, err = s.resolve(ctx, s.cfg.DeadLetterQueue); err != nil {
			return err
		}
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.receive() }()
		go func() { s.wg.Wait(); s.pollCancel(); s.lc.Done() }()
		return nil
	})
}

func (s *Subscriber[TTx]) resolve(ctx context.Context, name string) (string, error) {
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if s.cfg.Account != "" {
		in.QueueOwnerAWSAccountId = aws.String(s.cfg.Account)
	}
	out, err := s.client.GetQueueUrl(ctx, in)
	if err != nil {
		err = classify(fmt.Errorf("GetQueueUrl %q: %w", name, err))
		if publishers.IsMisconfigured(err) {
			return "", fmt.Errorf("sqs subscriber: %w: %w", ErrRefused, err)
		}
		return "", fmt.Errorf("sqs subscriber: %w", err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Stop stops receiving (interrupting the long poll) and waits for
// in-flight handlers to finish and their messages to be settled. When ctx
// ends first it cancels the handlers, whose messages are made visible
// again at once, and returns ctx's error. Stop before Start, or twice, is a
// no-op.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	return s.lc.Stop(ctx, s.pollCancel)
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers SubscriberConfig.ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

func (s *Subscriber[TTx]) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.OpTimeout)
}

// acquire takes one slot, waiting for it, then up to n-1 more that are
// free; 0 when Stop came first.
func (s *Subscriber[TTx]) acquire(n int) int {
	select {
	case s.slots <- struct{}{}:
	case <-s.lc.Stopping():
		return 0
	}
	got := 1
	for got < n {
		select {
		case s.slots <- struct{}{}:
			got++
		default:
			return got
		}
	}
	return got
}

func (s *Subscriber[TTx]) release(n int) {
	for range n {
		<-s.slots
	}
}

func seconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// receive long-polls for as many messages as there are free slots (at
// most 10) and hands them out: each on a goroutine of its own, except
// those of one FIFO group, which go one after the other on one.
func (s *Subscriber[TTx]) receive() {
	for !s.lc.Stopped() {
		n := s.acquire(min(s.cfg.Concurrency, maxBatch))
		if n == 0 {
			return
		}
		out, err := s.client.ReceiveMessage(s.pollCtx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(s.queueURL), MaxNumberOfMessages: int32(n),
			WaitTimeSeconds:             seconds(s.cfg.WaitTime),
			VisibilityTimeout:           seconds(s.cfg.VisibilityTimeout),
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameMessageGroupId},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			s.release(n)
			if s.lc.Stopped() {
				return
			}
			wait := 100 * time.Millisecond
			if err := classify(err); publishers.IsMisconfigured(err) {
				s.log.Error("sqs subscriber: receive: refused by SQS; retrying until the configuration is fixed", "err", err)
				wait = time.Second
			} else {
				s.log.Warn("sqs subscriber: receive", "err", err)
			}
			s.lc.Wait(wait)
			continue
		}
		var chains [][]types.Message
		groups := map[string]int{}
		for _, m := range out.Messages {
			g, ok := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			if i, seen := groups[g]; ok && s.fifo && seen {
				chains[i] = append(chains[i], m)
				continue
			}
			if ok && s.fifo {
				groups[g] = len(chains)
			}
			chains = append(chains, []types.Message{m})
		}
		used := 0
		for _, chain := range chains {
			if used == n { // more than asked for: wait for a slot
				if s.acquire(1) == 0 {
					s.releaseMessages(chain)
					continue
				}
				n++
			}
			used++
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.release(1)
				s.runChain(chain)
			}()
		}
		s.release(n - used)
	}
}

// runChain handles a FIFO group's messages of one receive in order; once
// one is not acknowledged, the later ones are made visible again unhandled
// (the group stays blocked behind the first while it is in flight).
func (s *Subscriber[TTx]) runChain(chain []types.Message) {
	for i, m := range chain {
		if s.lc.Context().Err() != nil || (i > 0 && s.lc.Stopped()) {
			s.releaseMessages(chain[i:])
			return
		}
		if a := s.process(m); a != subscribers.ActionAck && a != subscribers.ActionDeadLetter {
			s.releaseMessages(chain[i+1:])
			return
		}
	}
}

// releaseMessages makes messages visible again at once.
func (s *Subscriber[TTx]) releaseMessages(msgs []types.Message) {
	for _, m := range msgs {
		s.setVisibility(m, 0)
	}
}

func (s *Subscriber[TTx]) setVisibility(m types.Message, d time.Duration) {
	ctx, cancel := s.opCtx()
	defer cancel()
	if _, err := s.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(s.queueURL),
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: seconds(d)}); err != nil {
		s.log.Warn("sqs subscriber: ChangeMessageVisibility", "message", aws.ToString(m.MessageId), "err", err)
	}
}

// keepVisible extends m's visibility every VisibilityTimeout/3 until done
// is closed.
func (s *Subscriber[TTx]) keepVisible(m types.Message, done <-chan struct{}) {
	t := time.NewTicker(s.cfg.VisibilityTimeout / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.setVisibility(m, s.cfg.VisibilityTimeout)
		}
	}
}

// process handles one delivery and settles it, returning how.
func (s *Subscriber[TTx]) process(m types.Message) subscribers.Action {
	delivery, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	delivery = max(delivery, 1)
	st := subscribers.Settlement{Source: s.cfg.Queue, Delivery: delivery}
	msg, err := Decode(s.cfg.Topic, aws.ToString(m.Body), m.MessageAttributes, delivery)
	st.Message = msg
	done := make(chan struct{})
	var kw sync.WaitGroup
	kw.Go(func() { s.keepVisible(m, done) })
	r := consumer.Handle(s.lc.Context(), s.in, s.h, msg, err, delivery, s.cfg.MaxDeliveries, errExhausted)
	close(done)
	kw.Wait()
	st.Outcome, st.Err = r.Outcome, r.Err
	switch r.Action {
	case subscribers.ActionAck:
		s.ack(m, &st)
	case subscribers.ActionRelease: // a hard Stop cut the handler short: visible again at once
		st.Action = subscribers.ActionRelease
		s.setVisibility(m, 0)
	case subscribers.ActionDeadLetter:
		s.deadLetter(m, &st, r.Err)
	case subscribers.ActionRetry:
		s.retry(m, &st)
	}
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
	return st.Action
}

// ack deletes a committed (or duplicate) message. A lost delete leaves it
// to come back after the visibility timeout; the inbox drops it then.
func (s *Subscriber[TTx]) ack(m types.Message, st *subscribers.Settlement) {
	if s.cfg.Hooks.AfterCommit != nil {
		s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
	}
	st.Action = subscribers.ActionAck
	s.delete(m, st)
}

func (s *Subscriber[TTx]) delete(m types.Message, st *subscribers.Settlement) {
	ctx, cancel := s.opCtx()
	defer cancel()
	if _, err := s.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(s.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		s.log.Warn("sqs subscriber: DeleteMessage failed; the redelivery will be a duplicate", "id", st.Message.ID, "err", err)
	}
}

// retry sets the failed message's visibility to the backoff, rounded up
// to whole seconds (SQS's resolution): it comes back then.
func (s *Subscriber[TTx]) retry(m types.Message, st *subscribers.Settlement) {
	st.Action = subscribers.ActionRetry
	st.Delay = min(s.cfg.Backoff.Delay(st.Delivery), 12*time.Hour)
	s.log.Info("sqs subscriber: handler failed; retrying", "id", st.Message.ID, "delivery", st.Delivery, "delay", st.Delay, "err", st.Err)
	s.setVisibility(m, st.Delay)
}

// deadLetter sends the message to the dead-letter queue, then deletes it.
// When the send fails the message is retried, to be dead-lettered on its
// next delivery; when the delete is lost it may be dead-lettered twice.
func (s *Subscriber[TTx]) deadLetter(m types.Message, st *subscribers.Settlement, cause error) {
	st.Err = cause
	enc := deadLetter(aws.ToString(m.Body), m.MessageAttributes, st.Message, s.cfg.Queue, st.Delivery, cause)
	in := &sqs.SendMessageInput{QueueUrl: aws.String(s.dlqURL), MessageBody: aws.String(enc.body), MessageAttributes: enc.attrs}
	if isFIFO(s.cfg.DeadLetterQueue) {
		group := aws.ToString(nil)
		if g, ok := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; ok {
			group = g
		}
		if group == "" {
			group = s.cfg.Topic
		}
		in.MessageGroupId = aws.String(GroupID(group))
		in.MessageDeduplicationId = aws.String(GroupID("dead-" + aws.ToString(m.MessageId)))
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	if _, err := s.client.SendMessage(ctx, in); err != nil {
		s.log.Error("sqs subscriber: dead-letter SendMessage failed; retrying", "id", st.Message.ID, "err", err)
		st.Err = fmt.Errorf("%w (and the dead-letter SendMessage failed: %w)", cause, err)
		s.retry(m, st)
		return
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("sqs subscriber: dead-lettered", "id", st.Message.ID, "delivery", st.Delivery, "queue", s.cfg.DeadLetterQueue, "err", cause)
	s.delete(m, st)
}
