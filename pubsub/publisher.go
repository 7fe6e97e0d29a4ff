package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// ErrClosed is the error of a message published after Close (unavailable).
var ErrClosed = errors.New("pubsub publisher closed")

// errKeyBusy: a key's earlier messages were still in the client when the
// call's context ended (unavailable).
var errKeyBusy = errors.New("not sent: an earlier message of its key is still being published")

// errAfterFailed: an earlier message of the key in the call failed, so
// this one was not sent (or not retried) to keep the key's order.
var errAfterFailed = errors.New("not sent: an earlier message of its key in this call failed")

// topicID is what Pub/Sub accepts as a topic's ID.
var topicID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}$`)

// Publisher publishes outbox messages to Google Cloud Pub/Sub. It is safe
// for concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	log       *slog.Logger
	client    *gpubsub.Client
	ownClient bool

	mu     sync.RWMutex // held shared by Publish, exclusively by Close
	closed bool

	kmu    sync.Mutex                            // guards topics and keys
	topics map[string]*gpubsub.Publisher         // by Pub/Sub topic ID
	keys   map[orderKey][]*gpubsub.PublishResult // a key's latest messages sent
}

// orderKey is an ordering key of one topic: Pub/Sub pauses keys per topic.
type orderKey struct{ topic, key string }

var (
	_ publishers.Publisher   = (*Publisher)(nil)
	_ publishers.OrderKeeper = (*Publisher)(nil)
)

// NewPublisher returns a Publisher configured by cfg (nil is refused:
// Project is required). It makes a client unless cfg.Client is set; the
// client connects lazily, so NewPublisher succeeds while Pub/Sub is
// unreachable: Check tells an outage from a refused configuration before
// the first publish.
func NewPublisher(ctx context.Context, cfg *PublisherConfig) (*Publisher, error) {
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, log: c.Logger, client: c.Client,
		topics: map[string]*gpubsub.Publisher{}, keys: map[orderKey][]*gpubsub.PublishResult{}}
	if p.client == nil {
		client, err := newClient(ctx, c.Project, c.ClientOptions)
		if err != nil {
			return nil, err
		}
		p.client, p.ownClient = client, true
	}
	return p, nil
}

// Client returns the client the Publisher publishes with.
func (p *Publisher) Client() *gpubsub.Client { return p.client }

// KeepsKeyOrder reports true with ordering on (the default): the
// Publisher then keeps each key's order within a call, whatever fails
// (see the package documentation, "Ordering"), and the relay may send a
// key's events in one call.
func (p *Publisher) KeepsKeyOrder() bool { return !p.cfg.NoOrdering }

// TopicID is the Pub/Sub topic ID of the outbox topic: TopicPrefix+topic.
func (p *Publisher) TopicID(topic string) string { return p.cfg.TopicPrefix + topic }

// publisher returns the client's publisher of the topic ID, made once.
func (p *Publisher) publisher(id string) *gpubsub.Publisher {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	if tp, ok := p.topics[id]; ok {
		return tp
	}
	tp := p.client.Publisher(id)
	tp.EnableMessageOrdering = !p.cfg.NoOrdering
	s := &tp.PublishSettings
	s.CountThreshold, s.ByteThreshold, s.DelayThreshold = countThreshold, byteThreshold, delayThreshold
	s.NumGoroutines = numGoroutines
	s.Timeout = p.cfg.PublishTimeout
	p.topics[id] = tp
	return tp
}

// Publish publishes msgs and returns one error per message, nil when
// Pub/Sub stored it. See the package documentation for how errors are
// classified and how a key's order is kept.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	fail := func(i int, err error) {
		errs[i] = fmt.Errorf("pubsub publish %s to topic %q: %w", msgs[i].ID, p.TopicID(msgs[i].Topic), err)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed || ctx.Err() != nil {
		cause := ErrClosed
		if !p.closed {
			cause = fmt.Errorf("not sent: %w", ctx.Err())
		}
		for i := range msgs {
			fail(i, publishers.Unavailable(cause))
		}
		return errs
	}
	c := &call{p: p, msgs: msgs, errs: errs, fail: fail,
		pms: make([]*gpubsub.Message, len(msgs)), tps: make([]*gpubsub.Publisher, len(msgs)),
		res: make([]*gpubsub.PublishResult, len(msgs))}
	groups := map[orderKey][]int{}
	var order []orderKey
	// With ordering, a key one of whose messages is refused before it is
	// sent sends none of its later ones (publishers.OrderKeeper).
	refused := map[string]error{}
	for i := range msgs {
		m := &msgs[i]
		if cause, ok := refused[m.Key]; ok {
			fail(i, publishers.NotSent(fmt.Errorf("%w: %v", errAfterFailed, cause)))
			continue
		}
		refuse := func(err error) {
			fail(i, publishers.Permanent(err))
			if m.Key != "" && !p.cfg.NoOrdering {
				refused[m.Key] = err
			}
		}
		id := p.TopicID(m.Topic)
		if !topicID.MatchString(id) || strings.HasPrefix(id, "goog") {
			refuse(fmt.Errorf("%w: %q is no Pub/Sub topic ID (3 to 255 letters, digits and -_.~+%%, starting with a letter, not with goog)", ErrInvalid, id))
			continue
		}
		c.tps[i] = p.publisher(id)
		pm, err := toPubsub(m, !p.cfg.NoOrdering, c.tps[i].String())
		if err != nil {
			refuse(err)
			continue
		}
		c.pms[i] = pm
		if pm.OrderingKey == "" {
			c.res[i] = c.tps[i].Publish(ctx, pm)
			continue
		}
		k := orderKey{id, pm.OrderingKey}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		c.sendKey(ctx, k, groups[k])
	}
	c.await(ctx, nil)
	c.isolateInvalid(ctx, groups)
	for _, k := range order {
		c.orderFailures(groups[k])
	}
	p.forget(order)
	for i, r := range c.res {
		if r != nil && c.errs[i] == nil && c.resErr[i] != nil {
			fail(i, classify(c.resErr[i]))
		}
	}
	return errs
}

// call is one Publish call's state.
type call struct {
	p      *Publisher
	msgs   []outbox.Message
	errs   []error
	fail   func(i int, err error)
	pms    []*gpubsub.Message
	tps    []*gpubsub.Publisher
	res    []*gpubsub.PublishResult
	resErr []error
}

// sendKey sends the messages idx of the ordering key k, in order, once no
// earlier message of k is left in the client, resuming k first: the
// client pauses a key after a failed publish, and the relay re-sends a
// key's failed head before anything later of the key. Since nothing of k
// is in the client then, resuming cannot let a later message of an
// earlier call overtake a failed one. When ctx ends first, the messages
// fail as unavailable, unsent.
func (c *call) sendKey(ctx context.Context, k orderKey, idx []int) {
	if !c.p.gate(ctx, k, func() []*gpubsub.PublishResult {
		tp := c.tps[idx[0]]
		tp.ResumePublish(k.key)
		out := make([]*gpubsub.PublishResult, len(idx))
		for j, i := range idx {
			c.res[i] = tp.Publish(ctx, c.pms[i])
			out[j] = c.res[i]
		}
		return out
	}) {
		for _, i := range idx {
			c.fail(i, publishers.Unavailable(fmt.Errorf("%w (%w)", errKeyBusy, ctx.Err())))
		}
	}
}

// gate runs send, which publishes messages of k and returns their
// results, once every result of k's latest send is ready, and records
// what it returns as k's latest; it returns false, without running send,
// when ctx ends first.
func (p *Publisher) gate(ctx context.Context, k orderKey, send func() []*gpubsub.PublishResult) bool {
	for {
		p.kmu.Lock()
		busy := pending(p.keys[k])
		if busy == nil {
			p.keys[k] = send()
			p.kmu.Unlock()
			return true
		}
		p.kmu.Unlock()
		select {
		case <-busy.Ready():
		case <-ctx.Done():
			return false
		}
	}
}

// pending returns a result of rs not ready yet, or nil.
func pending(rs []*gpubsub.PublishResult) *gpubsub.PublishResult {
	for _, r := range rs {
		select {
		case <-r.Ready():
		default:
			return r
		}
	}
	return nil
}

// forget drops the keys of ks whose latest messages are all done.
func (p *Publisher) forget(ks []orderKey) {
	p.kmu.Lock()
	defer p.kmu.Unlock()
	for _, k := range ks {
		if pending(p.keys[k]) == nil {
			delete(p.keys, k)
		}
	}
}

// await waits for the results of the messages idx (nil: all) or ctx, and
// stores each one's error in resErr.
func (c *call) await(ctx context.Context, idx []int) {
	if c.resErr == nil {
		c.resErr = make([]error, len(c.res))
	}
	wait := func(i int) {
		if r := c.res[i]; r != nil {
			_, c.resErr[i] = r.Get(ctx)
		}
	}
	if idx != nil {
		for _, i := range idx {
			wait(i)
		}
		return
	}
	for i := range c.res {
		wait(i)
	}
}

// isolateInvalid re-sends, one at a time, the messages that failed with
// InvalidArgument when more than one did: Pub/Sub refuses a request as a
// whole, so only a message refused alone is known to be the invalid one
// (permanent). A key's messages are re-sent in order from its first
// failed one, stopping at the first that fails again.
func (c *call) isolateInvalid(ctx context.Context, groups map[orderKey][]int) {
	var invalid []int
	for i, err := range c.resErr {
		if err != nil && code(err) == codes.InvalidArgument {
			invalid = append(invalid, i)
		}
	}
	if len(invalid) < 2 {
		return
	}
	done := map[orderKey]bool{}
	for _, i := range invalid {
		key := c.pms[i].OrderingKey
		if key == "" {
			c.res[i] = c.tps[i].Publish(ctx, c.pms[i])
			c.await(ctx, []int{i})
			continue
		}
		k := orderKey{c.tps[i].ID(), key}
		if done[k] {
			continue
		}
		done[k] = true
		for _, j := range groups[k] {
			if c.resErr[j] == nil {
				continue
			}
			if !c.p.gate(ctx, k, func() []*gpubsub.PublishResult {
				c.tps[j].ResumePublish(key)
				c.res[j] = c.tps[j].Publish(ctx, c.pms[j])
				return []*gpubsub.PublishResult{c.res[j]}
			}) {
				c.resErr[j] = fmt.Errorf("%w (%w)", errKeyBusy, ctx.Err())
				break
			}
			c.await(ctx, []int{j})
			if c.resErr[j] != nil {
				break
			}
		}
	}
}

// orderFailures classifies the failures of a key's messages idx after its
// first failure: a message the client did not send because the key was
// paused (or that isolateInvalid did not retry) takes the class of the
// first failure when that is an outage or a refusal, and no class
// otherwise (it was not refused itself).
func (c *call) orderFailures(idx []int) {
	first := -1
	for _, i := range idx {
		if c.resErr[i] != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return
	}
	cause := classify(c.resErr[first])
	after := false
	for _, i := range idx {
		if i == first {
			after = true
			continue
		}
		if !after || c.resErr[i] == nil {
			continue
		}
		var paused gpubsub.ErrPublishingPaused
		if !errors.As(c.resErr[i], &paused) && code(c.resErr[i]) != codes.InvalidArgument {
			continue // failed for a reason of its own
		}
		err := publishers.NotSent(fmt.Errorf("%w: %w", errAfterFailed, c.resErr[i]))
		switch {
		case publishers.IsUnavailable(cause):
			err = publishers.Unavailable(err)
		case publishers.IsMisconfigured(cause):
			err = publishers.Misconfigured(err)
		}
		c.fail(i, err)
	}
}

// Close stops the client's publishers, which send what they hold (within
// PublishTimeout), and closes the client when NewPublisher made it.
// Calling Close again does nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.kmu.Lock()
	tps := p.topics
	p.topics = nil
	p.kmu.Unlock()
	var wg sync.WaitGroup
	for _, tp := range tps {
		wg.Go(tp.Stop)
	}
	wg.Wait()
	if p.ownClient {
		if err := p.client.Close(); err != nil {
			return fmt.Errorf("pubsub publisher: close: %w", err)
		}
	}
	return nil
}
