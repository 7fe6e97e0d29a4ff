package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Publisher publishes outbox messages to Kafka. It is safe for concurrent
// use.
type Publisher struct {
	cfg   PublisherConfig
	cl    *kgo.Client
	ref   *refusals
	lanes *lanes // the clients of calls carrying key runs (keyruns.go)

	maxBatch     func(topic string) int32 // kgo.ProducerBatchMaxBytes, as configured
	defaultTopic string                   // kgo.DefaultProduceTopic, as configured

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close: waiting Publish calls give up
}

var (
	_ publishers.Publisher   = (*Publisher)(nil)
	_ publishers.Checker     = (*Publisher)(nil)
	_ publishers.OrderKeeper = (*Publisher)(nil)
)

// NewPublisher returns a Publisher producing to cfg.Brokers; a nil cfg
// means every default. It does not wait for a broker to answer: franz-go
// connects lazily, so NewPublisher succeeds while Kafka is down and the
// first Publish calls fail as unavailable until it is up (Check says at
// once).
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	if cfg == nil {
		cfg = &PublisherConfig{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.WithDefaults()
	ref := newRefusals(true)
	opts := c.clientOptions(ref)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka publisher: %s", redactText(err.Error()))
	}
	// How the options dial (TLS, a Dialer of the user's): the lanes dial
	// the same way, through their write gates.
	dial, _ := cl.OptValue(kgo.Dialer).(func(context.Context, string, string) (net.Conn, error))
	maxBatch, _ := cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)
	defaultTopic, _ := cl.OptValue(kgo.DefaultProduceTopic).(string)
	if dial == nil || maxBatch == nil {
		cl.Close()
		return nil, errors.New("kafka publisher: franz-go did not report its dialer or batch limit")
	}
	return &Publisher{cfg: c, cl: cl, ref: ref, lanes: newLanes(opts, dial), maxBatch: maxBatch, defaultTopic: defaultTopic, done: make(chan struct{})}, nil
}

// Check asks a broker for the cluster's metadata, which proves that the
// brokers can be reached and accept the client's credentials (SASL): nil
// when they do; an error classified publishers.Misconfigured when they
// refuse the credentials, the mechanism or the permission to describe
// the cluster; one classified publishers.Unavailable when no broker
// answers before ctx ends. (The configuration names no fixed topic: a
// topic the client may not write fails its records, as Misconfigured.)
func (p *Publisher) Check(ctx context.Context) error {
	if p.closed.Load() {
		return publishers.Unavailable(fmt.Errorf("kafka publisher: check: %w", ErrClosed))
	}
	where := strings.Join(p.cfg.Brokers, ",")
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: the brokers and the cluster only
	refused := p.ref.wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		resp kmsg.Response
		err  error
		got  = make(chan struct{})
	)
	go func() {
		defer close(got)
		resp, err = p.cl.Request(ctx, req)
	}()
	select {
	case <-got:
	case <-refused:
		cancel()
		<-got
		return classify(fmt.Errorf("kafka publisher: check %s: the brokers refused the client: %w", where, p.ref.err()))
	}
	if err != nil {
		var eof *kgo.ErrFirstReadEOF
		if errors.As(err, &eof) {
			// The broker hung up on the first request: it wants SASL
			// or TLS the configuration does not give.
			return publishers.Misconfigured(redacted{fmt.Errorf("kafka publisher: check %s: %w", where, err)})
		}
		return classify(fmt.Errorf("kafka publisher: check %s: %w", where, err))
	}
	if m, ok := resp.(*kmsg.MetadataResponse); ok && len(m.Brokers) == 0 {
		return publishers.Unavailable(fmt.Errorf("kafka publisher: check %s: the cluster lists no broker", where))
	}
	p.ref.ok()
	return nil
}

// KeepsKeyOrder reports whether the Publisher keeps each key's order
// within a Publish call by itself (publishers.OrderKeeper): true unless
// PublisherConfig.NoKeyRuns. The relay then sends a batch's events of a
// key in one pipelined call. See the package documentation, "Key order
// within a call".
func (p *Publisher) KeepsKeyOrder() bool { return !p.cfg.NoKeyRuns }

// Client returns the Publisher's main franz-go client: the one that
// produces calls whose keys are all different. A call carrying several
// messages of a key produces on a client of its own (see the package
// documentation, "Key order within a call").
func (p *Publisher) Client() *kgo.Client { return p.cl }

// topic maps an outbox topic to a Kafka topic.
func (p *Publisher) topic(topic string) string {
	if p.cfg.Topic != nil {
		return p.cfg.Topic(topic)
	}
	return p.cfg.TopicPrefix + topic
}

// record builds the record of m.
func (p *Publisher) record(m *outbox.Message) *kgo.Record {
	r := &kgo.Record{Topic: p.topic(m.Topic), Value: m.Payload}
	if m.Key != "" {
		r.Key = []byte(m.Key)
	}
	// The record timestamp stays the produce time: a CreatedAt from before
	// a long outage could put the record past the topic's retention.ms at
	// once, or be refused by log.message.timestamp.before.max.ms.
	r.Headers = make([]kgo.RecordHeader, 0, len(m.Headers)+3)
	for k, v := range m.Headers {
		if reserved(k) {
			continue
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderID, Value: []byte(m.ID.String())})
	if m.Type != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderType, Value: []byte(m.Type)})
	}
	if !m.CreatedAt.IsZero() {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderCreatedAt, Value: []byte(m.CreatedAt.UTC().Format(time.RFC3339Nano))})
	}
	return r
}

func reserved(k string) bool {
	return strings.EqualFold(k, HeaderID) || strings.EqualFold(k, HeaderType) || strings.EqualFold(k, HeaderCreatedAt)
}

// Publish hands every message to the client at once, then waits for every
// acknowledgement or for ctx to end. It returns one error per message, nil
// when Kafka stored it (acks=all). With key runs (KeepsKeyOrder), once a
// message of a key fails, the key's later messages in the call are not
// stored and fail as publishers.NotSentAfter it. See the package
// documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	refused := p.ref.wait()
	var (
		mu      sync.Mutex // guards errs and settled against late callbacks
		settled = make([]bool, len(msgs))
		gone    bool // Publish returned: callbacks write nothing
		wg      sync.WaitGroup
	)
	cl := p.cl
	runs := p.KeepsKeyOrder() && repeatsKey(msgs)
	rctx, stop := ctx, func() bool { return false }
	var (
		ln         *lane
		handedOver func() func() bool // runs: links rctx to ctx once the records are handed over
		failed     map[string]error   // runs: a key's first message that failed before it was produced
	)
	if runs {
		var err error
		if ln, err = p.lanes.get(ctx, p.done); err != nil {
			for i := range msgs {
				errs[i] = classify(fmt.Errorf("kafka publish %s: not sent: %w", msgs[i].ID, err))
			}
			return errs
		}
		cl = ln.cl
		rctx, handedOver = handOverContext(ctx)
		failed = map[string]error{}
		ln.gate.hold()
	}
	// Produce after Close fails the record with kgo.ErrClientClosed
	// (unavailable): no lock is needed, and none is held while Produce
	// blocks for buffer space.
	for i := range msgs {
		m := &msgs[i]
		if cause := failed[m.Key]; cause != nil && m.Key != "" {
			errs[i], settled[i] = publishers.NotSentAfter(fmt.Sprintf("kafka publish %s", m.ID), cause), true
			continue
		}
		r := p.record(m)
		var err error
		switch {
		case p.closed.Load():
			err = publishers.Unavailable(fmt.Errorf("kafka publish %s: %w", m.ID, ErrClosed))
		case ctx.Err() != nil:
			err = publishers.Unavailable(fmt.Errorf("kafka publish %s: not sent: %w", m.ID, ctx.Err()))
		default:
			err = p.fits(m, r)
		}
		if err != nil {
			errs[i], settled[i] = err, true
			if runs {
				failed[m.Key] = err
			}
			continue
		}
		wg.Add(1)
		cl.Produce(rctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if gone {
				return
			}
			switch {
			case err == nil:
				p.ref.ok()
			case !refusal(err) && p.ref.current() != nil:
				// Failed for want of a connection the brokers refuse
				// (or with another record of its partition): the
				// refusal is the reason.
				errs[i] = publishers.Misconfigured(redacted{fmt.Errorf("kafka publish %s to %q: %w (the brokers refused the client: %w)",
					m.ID, r.Topic, err, p.ref.err())})
			default:
				errs[i] = classify(fmt.Errorf("kafka publish %s to %q: %w", m.ID, r.Topic, err))
			}
			settled[i] = true
		})
	}
	if runs {
		ln.gate.release()
		stop = handedOver()
	}

	all := make(chan struct{})
	go func() {
		wg.Wait()
		close(all)
		if ln != nil {
			p.lanes.put(ln) // every record of the call settled
		}
	}()
	var why error
	select {
	case <-all:
		stop()
		if runs {
			afterFirstFailure(msgs, errs)
		}
		return errs
	case <-ctx.Done():
		why = publishers.Unavailable(fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err()))
	case <-p.done:
		why = publishers.Unavailable(fmt.Errorf("no acknowledgement before Close: %w", ErrClosed))
	case <-refused:
		why = publishers.Misconfigured(redacted{fmt.Errorf("no acknowledgement: the brokers refused the client: %w", p.ref.err())})
	}
	mu.Lock()
	defer mu.Unlock()
	gone = true
	out := make([]error, len(msgs))
	for i := range msgs {
		if settled[i] {
			out[i] = errs[i]
		} else {
			out[i] = fmt.Errorf("kafka publish %s: %w", msgs[i].ID, why)
		}
	}
	if runs {
		afterFirstFailure(msgs, out)
	}
	return out
}

// ErrClosed is returned (as unavailable) for messages published after
// Close, or still waiting for their acknowledgement when Close was called.
var ErrClosed = errors.New("kafka publisher closed")

// Close closes the client: records not yet acknowledged fail (Publish
// calls waiting for them return at once, the messages failed as
// unavailable) and every goroutine and connection ends. Calling Close again
// does nothing.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.done)
		p.cl.Close()
		p.lanes.close()
	})
	return nil
}
