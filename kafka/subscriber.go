package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/subscribers"
)

// Subscriber consumes Kafka topics through a consumer group into an inbox.
// TTx is the inbox's transaction type.
type Subscriber[TTx any] struct {
	in  *inbox.Inbox[TTx]
	h   inbox.Handler[TTx]
	cfg SubscriberConfig
	log *slog.Logger

	lc      *consumer.Lifecycle // Done: the poll loop has returned and the client is closed
	cl      *kgo.Client
	pcancel context.CancelFunc
	ref     *refusals
}

var _ subscribers.Subscriber = (*Subscriber[any])(nil)

// NewSubscriber returns a Subscriber that handles the records of
// cfg.Topics with h through in. It does not connect until Start. cfg is
// required (Topics, Group and DeadLetterTopic have no default); what
// SubscriberConfig.Validate reports is refused.
func NewSubscriber[TTx any](in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	if cfg == nil {
		cfg = &SubscriberConfig{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if in == nil || h == nil {
		return nil, errors.New("kafka subscriber: nil inbox or handler")
	}
	c := cfg.WithDefaults()
	return &Subscriber[TTx]{in: in, h: consumer.Safe(h), cfg: c, log: c.Logger.With("group", c.Group),
		lc: consumer.NewLifecycle("kafka subscriber"), ref: newRefusals(false)}, nil
}

// ClientOptions are the options Start creates its client with: the
// subscriber's own, then SubscriberConfig.ClientOptions.
func (s *Subscriber[TTx]) ClientOptions() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(s.cfg.ClientID),
		kgo.ConsumerGroup(s.cfg.Group),
		kgo.ConsumeTopics(s.cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// A batch is settled before the group may rebalance, so a
		// partition does not move while one of its records is handled.
		kgo.BlockRebalanceOnPoll(),
		kgo.WithLogger(&logger{l: s.log, ref: s.ref, prefix: "kafka subscriber: "}),
		kgo.WithHooks(saslHook{s.ref}),
	}
	return append(opts, s.cfg.ClientOptions...)
}

// Start creates the client, checks that a broker answers and accepts the
// client's credentials, and starts consuming. Brokers that refuse the
// credentials (SASL) fail it at once, with the refusal in the error. It may
// be called once.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error { return s.start(ctx) })
}

func (s *Subscriber[TTx]) start(ctx context.Context) error {
	cl, err := kgo.NewClient(s.ClientOptions()...)
	if err != nil {
		return fmt.Errorf("kafka subscriber: client: %w", err)
	}
	if err := s.ping(ctx, cl); err != nil {
		cl.Close()
		return err
	}
	s.cl = cl
	var pctx context.Context
	pctx, s.pcancel = context.WithCancel(context.Background())
	go s.poll(pctx)
	return nil
}

// ping waits for a broker to answer, or for the brokers to refuse the
// client.
func (s *Subscriber[TTx]) ping(ctx context.Context, cl *kgo.Client) error {
	refused := s.ref.wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var err error
	got := make(chan struct{})
	go func() {
		defer close(got)
		err = cl.Ping(ctx)
	}()
	select {
	case <-got:
	case <-refused:
		cancel()
		<-got
		return fmt.Errorf("kafka subscriber: the brokers refused the client: %w", s.ref.err())
	}
	if err == nil {
		return nil
	}
	var eof *kgo.ErrFirstReadEOF
	if errors.As(err, &eof) {
		return fmt.Errorf("kafka subscriber: the brokers hung up on the client (do they require SASL or TLS?): %w", err)
	}
	return fmt.Errorf("kafka subscriber: no broker answers: %w", err)
}

// Stop stops polling, lets the records being handled finish and commits
// their offsets; records polled but not started are left uncommitted, for
// the partition's next owner. When ctx ends first it cancels the handlers'
// context, waits for them to return and returns ctx's error. The client
// leaves the group and is closed. Stop before Start, or twice, is a no-op.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	return s.lc.Stop(ctx, func() { s.pcancel() })
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers SubscriberConfig.ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

// poll polls batches and settles each before the next: the partitions of a
// batch in parallel, the records of a partition in order.
func (s *Subscriber[TTx]) poll(ctx context.Context) {
	defer s.lc.Done()
	defer s.cl.Close()
	defer s.cl.AllowRebalance()
	for {
		fetches := s.cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			s.log.Warn("kafka subscriber: fetch", "topic", topic, "partition", partition, "err", err)
		})
		var wg sync.WaitGroup
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, r := range p.Records {
					if s.lc.Stopped() || !s.record(r) {
						return
					}
				}
			}()
		})
		wg.Wait()
		s.cl.AllowRebalance()
		if s.lc.Stopped() {
			return
		}
	}
}

// record handles r, retrying in place, until it is committed or
// dead-lettered (true) or a Stop abandons it (false).
func (s *Subscriber[TTx]) record(r *kgo.Record) bool {
	ctx := s.lc.Context()
	for delivery := 1; ; delivery++ {
		st := subscribers.Settlement{Source: r.Topic, Delivery: delivery}
		msg, err := Decode(r, s.cfg.TopicPrefix, delivery)
		st.Message = msg
		// The delivery count never passes MaxDeliveries: no exhausted error.
		res := consumer.Handle(ctx, s.in, s.h, msg, err, delivery, s.cfg.MaxDeliveries, nil)
		st.Outcome, st.Err = res.Outcome, res.Err
		switch res.Action {
		case subscribers.ActionAck:
			s.commit(r, &st)
			s.settle(st)
			return true
		case subscribers.ActionRelease: // a hard Stop cut the handler short
			st.Action = subscribers.ActionRelease
			s.settle(st)
			return false
		case subscribers.ActionDeadLetter:
			return s.deadLetter(r, &st, res.Err)
		}
		st.Action = subscribers.ActionRetry
		st.Delay = s.cfg.Backoff.Delay(delivery)
		s.log.Info("kafka subscriber: handler failed; retrying", "id", msg.ID, "topic", r.Topic, "partition", r.Partition,
			"offset", r.Offset, "delivery", delivery, "delay", st.Delay, "err", st.Err)
		s.settle(st)
		if !s.lc.Wait(st.Delay) {
			return false
		}
	}
}

func (s *Subscriber[TTx]) settle(st subscribers.Settlement) {
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
}

// commit commits the offset past r. A failed commit (the partition moved
// to another member) makes the next owner read r again: a duplicate.
func (s *Subscriber[TTx]) commit(r *kgo.Record, st *subscribers.Settlement) {
	if s.cfg.Hooks.AfterCommit != nil && st.Action == 0 {
		s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
	}
	if st.Action == 0 {
		st.Action = subscribers.ActionAck
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
	defer cancel()
	if err := s.cl.CommitRecords(ctx, r); err != nil {
		s.log.Warn("kafka subscriber: offset commit failed; the record will be read again", "id", st.Message.ID,
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
	}
}

// deadLetter produces r to the dead-letter topic and commits its offset.
// A failed produce is tried again, with the backoff, until it succeeds or
// Stop abandons the record (false).
func (s *Subscriber[TTx]) deadLetter(r *kgo.Record, st *subscribers.Settlement, cause error) bool {
	st.Err = cause
	dl := deadLetterRecord(s.cfg.DeadLetterTopic, r, s.cfg.Group, st.Delivery, cause)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CommitTimeout)
		err := s.cl.ProduceSync(ctx, dl).FirstErr()
		cancel()
		if err == nil {
			break
		}
		s.log.Error("kafka subscriber: dead-letter produce failed; trying again", "id", st.Message.ID, "err", err)
		if !s.lc.Wait(s.cfg.Backoff.Delay(attempt)) {
			st.Action = subscribers.ActionRelease
			st.Err = fmt.Errorf("%w (and the dead-letter produce failed: %w)", cause, err)
			s.settle(*st)
			return false
		}
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("kafka subscriber: dead-lettered", "id", st.Message.ID, "topic", r.Topic, "partition", r.Partition,
		"offset", r.Offset, "delivery", st.Delivery, "err", cause)
	s.commit(r, st)
	s.settle(*st)
	return true
}
