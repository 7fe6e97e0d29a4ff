package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/subscribers"
)

// Subscriber consumes Redis streams through a consumer group into an inbox.
// TTx is the inbox's transaction type.
type Subscriber[TTx any] struct {
	rdb goredis.UniversalClient
	in  *inbox.Inbox[TTx]
	h   inbox.Handler[TTx]
	cfg SubscriberConfig
	log *slog.Logger

	slots chan struct{} // one token per running handler

	lc *consumer.Lifecycle // Stopping: read and claim no more; Done: every goroutine has returned
	wg sync.WaitGroup

	heldMu sync.Mutex
	held   map[string]map[string]struct{} // stream → entry IDs being handled
}

// errExhausted is the dead-letter reason for an entry delivered more than
// MaxDeliveries times without a result (its consumer crashed or stalled).
var errExhausted = errors.New("delivered more than MaxDeliveries times without a result (the consumer crashed or stalled)")

var _ subscribers.Subscriber = (*Subscriber[any])(nil)

// NewSubscriber returns a Subscriber that handles the entries of
// cfg.Streams with h through in, reading them with rdb. cfg is required
// (its Streams, Group and DeadLetterStream are). It does not talk to Redis
// until Start. The client stays the caller's to close, after Stop.
func NewSubscriber[TTx any](rdb goredis.UniversalClient, in *inbox.Inbox[TTx], h inbox.Handler[TTx], cfg *SubscriberConfig) (*Subscriber[TTx], error) {
	if cfg == nil {
		return nil, errors.New("redis subscriber config: nil: Streams, Group and DeadLetterStream are required")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	if rdb == nil || in == nil || h == nil {
		return nil, errors.New("redis subscriber: nil client, inbox or handler")
	}
	return &Subscriber[TTx]{rdb: rdb, in: in, h: consumer.Safe(h), cfg: c,
		log:   c.Logger.With("group", c.Group, "consumer", c.Consumer),
		slots: make(chan struct{}, c.Concurrency), lc: consumer.NewLifecycle("redis subscriber"),
		held: map[string]map[string]struct{}{}}, nil
}

// Consumer is this instance's consumer name within the group.
func (s *Subscriber[TTx]) Consumer() string { return s.cfg.Consumer }

// Start creates the consumer group on each stream where it is missing
// (XGROUP CREATE … 0 MKSTREAM) and starts handling entries. It may be
// called once. It fails at once when Redis cannot be reached or refuses
// the client; a refusal of the configuration (credentials, permissions,
// database) wraps ErrRefused.
func (s *Subscriber[TTx]) Start(ctx context.Context) error {
	return s.lc.Start(func() error {
		if err := s.createGroups(ctx); err != nil {
			return err
		}
		s.wg.Add(2)
		go func() { defer s.wg.Done(); s.read() }()
		go func() { defer s.wg.Done(); s.keepAlive() }()
		go func() { s.wg.Wait(); s.lc.Done() }()
		return nil
	})
}

// createGroups creates the group on each stream where it is missing. A
// refusal (credentials, permissions, database) wraps ErrRefused.
func (s *Subscriber[TTx]) createGroups(ctx context.Context) error {
	for _, stream := range s.cfg.Streams {
		err := s.rdb.XGroupCreateMkStream(ctx, stream, s.cfg.Group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			err = fmt.Errorf("create group %s on %s: %w", s.cfg.Group, stream, err)
			if refused(err) {
				return fmt.Errorf("redis subscriber: %w: %w", ErrRefused, err)
			}
			return fmt.Errorf("redis subscriber: %w", err)
		}
	}
	return nil
}

// ErrRefused marks an error of Start as Redis refusing the subscriber's
// configuration: wrong credentials (WRONGPASS, NOAUTH), no permission
// (NOPERM), an unknown database. Retrying does not help until the
// configuration is fixed.
var ErrRefused = errors.New("refused by Redis (credentials, permissions or database)")

// refused reports whether err is Redis refusing the configuration.
func refused(err error) bool { return publishers.IsMisconfigured(classify(err)) }

// Stop stops reading and claiming, and waits for in-flight handlers to
// finish and their entries to be settled. When ctx ends first it cancels
// the handlers' context, waits for them to return and returns ctx's error;
// their entries are left pending, claimable at once. Stop before Start, or
// twice, is a no-op.
func (s *Subscriber[TTx]) Stop(ctx context.Context) error {
	return s.lc.Stop(ctx, nil)
}

// Run starts the subscriber and stops it when ctx ends, giving in-flight
// handlers SubscriberConfig.ShutdownTimeout.
func (s *Subscriber[TTx]) Run(ctx context.Context) error {
	return consumer.Run(ctx, s.Start, s.Stop, s.cfg.ShutdownTimeout)
}

// acquire takes one slot, waiting for it, and then up to n-1 more that are
// free. It returns how many it took, 0 when Stop came first.
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

func (s *Subscriber[TTx]) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.cfg.OpTimeout)
}

// read takes new entries with XREADGROUP, as many as there are free slots,
// and every PollInterval first claims entries idle for ClaimIdle. One
// goroutine does both, so claims are not starved of slots. A claim that
// fills every free slot may have left more claimable entries: the next
// claim then comes as soon as a slot is free, not a PollInterval later, so
// a backlog of due retries (a database outage fails every entry read
// meanwhile) drains at the handlers' pace rather than at Concurrency
// entries per PollInterval.
func (s *Subscriber[TTx]) read() {
	streams := make([]string, 0, 2*len(s.cfg.Streams))
	streams = append(streams, s.cfg.Streams...)
	for range s.cfg.Streams {
		streams = append(streams, ">")
	}
	nextClaim := time.Now()
	for !s.lc.Stopped() {
		n := s.acquire(s.cfg.Concurrency)
		if n == 0 {
			return
		}
		if now := time.Now(); !now.Before(nextClaim) {
			for _, stream := range s.cfg.Streams {
				if n > 0 && !s.lc.Stopped() {
					n = s.claimStream(stream, n)
				}
			}
			nextClaim = now.Add(s.cfg.PollInterval)
			if n == 0 { // every slot went to a claimed entry: there may be more
				nextClaim = now
			}
		}
		if n == 0 || s.lc.Stopped() {
			s.release(n)
			continue
		}
		block := max(min(s.cfg.Block, time.Until(nextClaim)), time.Millisecond)
		res, err := s.rdb.XReadGroup(context.Background(), &goredis.XReadGroupArgs{Group: s.cfg.Group,
			Consumer: s.cfg.Consumer, Streams: streams, Count: int64(n), Block: block}).Result()
		if err != nil {
			s.release(n)
			if !errors.Is(err, goredis.Nil) {
				wait := 100 * time.Millisecond
				if refused(err) {
					s.log.Error("redis subscriber: read: refused by Redis (credentials, permissions or database); retrying until the configuration is fixed", "err", err)
					wait = time.Second
				} else {
					s.log.Warn("redis subscriber: read", "err", err)
				}
				if strings.HasPrefix(err.Error(), "NOGROUP") { // a stream was deleted
					if err := s.createGroups(context.Background()); err != nil {
						s.log.Warn("redis subscriber: re-creating the consumer groups", "err", err)
					}
				}
				s.lc.Wait(wait)
			}
			continue
		}
		for _, xs := range res {
			for _, e := range xs.Messages {
				if s.lc.Stopped() { // read but not started: leave it claimable
					s.markIdle(xs.Stream, e.ID, s.cfg.ClaimIdle)
					continue
				}
				if n == 0 {
					if n = s.acquire(1); n == 0 { // stopping: leave it claimable
						s.markIdle(xs.Stream, e.ID, s.cfg.ClaimIdle)
						continue
					}
				}
				n--
				s.spawn(xs.Stream, e, 1)
			}
		}
		s.release(n)
	}
}

// spawn handles e on a goroutine of its own, which gives back its slot.
func (s *Subscriber[TTx]) spawn(stream string, e goredis.XMessage, delivery int) {
	s.hold(stream, e.ID, true)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.release(1)
		defer s.hold(stream, e.ID, false)
		s.process(stream, e, delivery)
	}()
}

func (s *Subscriber[TTx]) hold(stream, id string, on bool) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if on {
		if s.held[stream] == nil {
			s.held[stream] = map[string]struct{}{}
		}
		s.held[stream][id] = struct{}{}
	} else {
		delete(s.held[stream], id)
	}
}

// keepAlive resets the idle time of the entries being handled every
// ClaimIdle/3.
func (s *Subscriber[TTx]) keepAlive() {
	t := time.NewTicker(s.cfg.ClaimIdle / 3)
	defer t.Stop()
	for {
		select {
		case <-s.lc.Stopping():
			return
		case <-t.C:
			s.heartbeat()
		}
	}
}

// heartbeat resets the idle time of the entries being handled (XCLAIM …
// JUSTID does not count a delivery), so no other instance claims them.
func (s *Subscriber[TTx]) heartbeat() {
	s.heldMu.Lock()
	ids := map[string][]string{}
	for stream, m := range s.held {
		for id := range m {
			ids[stream] = append(ids[stream], id)
		}
	}
	s.heldMu.Unlock()
	for stream, list := range ids {
		s.touch(stream, 0, list...)
	}
}

// claimStream claims, with XAUTOCLAIM, up to n entries idle for ClaimIdle
// and handles them, each with one of the n slots the caller holds. It
// returns the slots left.
func (s *Subscriber[TTx]) claimStream(stream string, n int) int {
	ctx, cancel := s.opCtx()
	defer cancel()
	msgs, _, deleted, err := s.rdb.XAutoClaimWithDeleted(ctx, &goredis.XAutoClaimArgs{Stream: stream, Group: s.cfg.Group,
		Consumer: s.cfg.Consumer, MinIdle: s.cfg.ClaimIdle, Start: "0-0", Count: int64(n)}).Result()
	if err != nil {
		s.log.Warn("redis subscriber: claim", "stream", stream, "err", err)
		return n
	}
	if len(deleted) > 0 { // trimmed away while pending: nothing to handle
		_ = s.rdb.XAck(ctx, stream, s.cfg.Group, deleted...).Err()
	}
	for _, e := range msgs {
		delivery := 0
		p, err := s.rdb.XPendingExt(ctx, &goredis.XPendingExtArgs{Stream: stream, Group: s.cfg.Group,
			Start: e.ID, End: e.ID, Count: 1}).Result()
		if err == nil && len(p) == 1 {
			delivery = int(p[0].RetryCount)
		} else if err != nil {
			s.log.Warn("redis subscriber: delivery count", "stream", stream, "entry", e.ID, "err", err)
		}
		if s.lc.Stopped() {
			s.markIdle(stream, e.ID, s.cfg.ClaimIdle)
			continue
		}
		if n == 0 { // more claimed than asked for: wait for a slot
			if n = s.acquire(1); n == 0 {
				s.markIdle(stream, e.ID, s.cfg.ClaimIdle)
				continue
			}
		}
		n--
		s.spawn(stream, e, delivery)
	}
	return n
}

// touchScript sets the idle time (ARGV[3], ms) of the entries ARGV[4:] of
// stream KEYS[1] that consumer ARGV[2] of group ARGV[1] still owns, with
// XCLAIM … IDLE … JUSTID, which does not count a delivery. Entries another
// consumer claimed meanwhile are left alone.
var touchScript = goredis.NewScript(`
local n = 0
for i = 4, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #p == 1 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE', ARGV[3], 'JUSTID')
    n = n + 1
  end
end
return n
`)

// touch sets the idle time of entries this consumer owns: 0 keeps them
// alive, ClaimIdle makes them claimable at once, ClaimIdle-d after d.
func (s *Subscriber[TTx]) touch(stream string, idle time.Duration, ids ...string) {
	ctx, cancel := s.opCtx()
	defer cancel()
	args := make([]any, 0, 3+len(ids))
	args = append(args, s.cfg.Group, s.cfg.Consumer, max(idle, 0).Milliseconds())
	for _, id := range ids {
		args = append(args, id)
	}
	if err := touchScript.Run(ctx, s.rdb, []string{stream}, args...).Err(); err != nil {
		s.log.Warn("redis subscriber: set idle time", "stream", stream, "entries", len(ids), "err", err)
	}
}

// markIdle sets the idle time of one entry this consumer owns.
func (s *Subscriber[TTx]) markIdle(stream, id string, idle time.Duration) {
	s.touch(stream, idle, id)
}

// process handles one delivery and settles it.
func (s *Subscriber[TTx]) process(stream string, e goredis.XMessage, delivery int) {
	st := subscribers.Settlement{Source: stream, Delivery: delivery}
	msg, err := Decode(stream, e, s.cfg.StreamPrefix, delivery)
	st.Message = msg
	r := consumer.Handle(s.lc.Context(), s.in, s.h, msg, err, delivery, s.cfg.MaxDeliveries, errExhausted)
	st.Outcome, st.Err = r.Outcome, r.Err
	switch r.Action {
	case subscribers.ActionAck:
		s.ack(stream, e, &st)
	case subscribers.ActionRelease: // a hard Stop cut the handler short: claimable at once
		st.Action = subscribers.ActionRelease
		s.markIdle(stream, e.ID, s.cfg.ClaimIdle)
	case subscribers.ActionDeadLetter:
		s.deadLetter(stream, e, &st, r.Err)
	case subscribers.ActionRetry:
		s.retry(stream, e, &st)
	}
	if s.cfg.Hooks.AfterSettle != nil {
		s.cfg.Hooks.AfterSettle(st)
	}
}

// ack acknowledges a committed (or duplicate) entry. A lost XACK leaves the
// entry pending; it is claimed again and dropped by the inbox.
func (s *Subscriber[TTx]) ack(stream string, e goredis.XMessage, st *subscribers.Settlement) {
	if s.cfg.Hooks.AfterCommit != nil {
		s.cfg.Hooks.AfterCommit(st.Message, st.Outcome)
	}
	st.Action = subscribers.ActionAck
	ctx, cancel := s.opCtx()
	defer cancel()
	if err := s.rdb.XAck(ctx, stream, s.cfg.Group, e.ID).Err(); err != nil {
		s.log.Warn("redis subscriber: XACK failed; the redelivery will be a duplicate", "id", st.Message.ID, "err", err)
	}
}

// retry leaves a failed entry pending, claimable after the backoff.
func (s *Subscriber[TTx]) retry(stream string, e goredis.XMessage, st *subscribers.Settlement) {
	st.Action = subscribers.ActionRetry
	st.Delay = s.cfg.retryDelay(st.Delivery)
	s.log.Info("redis subscriber: handler failed; retrying", "id", st.Message.ID, "stream", stream, "entry", e.ID,
		"delivery", st.Delivery, "delay", st.Delay, "err", st.Err)
	s.markIdle(stream, e.ID, s.cfg.ClaimIdle-st.Delay)
}

// deadLetter adds the entry to the dead-letter stream, then XACKs it. When
// the XADD fails the entry is retried, to be dead-lettered on its next
// delivery; when the XACK is lost it may be dead-lettered twice.
func (s *Subscriber[TTx]) deadLetter(stream string, e goredis.XMessage, st *subscribers.Settlement, cause error) {
	st.Err = cause
	ctx, cancel := s.opCtx()
	defer cancel()
	vals := deadLetterValues(stream, e, s.cfg.Group, s.cfg.Consumer, st.Delivery, cause)
	if err := s.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: s.cfg.DeadLetterStream, ID: "*", Values: vals}).Err(); err != nil {
		s.log.Error("redis subscriber: dead-letter XADD failed; retrying", "id", st.Message.ID, "err", err)
		st.Err = fmt.Errorf("%w (and the dead-letter XADD failed: %w)", cause, err)
		s.retry(stream, e, st)
		return
	}
	st.Action = subscribers.ActionDeadLetter
	s.log.Warn("redis subscriber: dead-lettered", "id", st.Message.ID, "delivery", st.Delivery, "stream", s.cfg.DeadLetterStream, "err", cause)
	if err := s.rdb.XAck(ctx, stream, s.cfg.Group, e.ID).Err(); err != nil {
		s.log.Warn("redis subscriber: XACK of a dead letter failed", "id", st.Message.ID, "err", err)
	}
}
