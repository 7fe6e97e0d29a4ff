package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Publisher publishes outbox messages to NATS JetStream. It is safe for
// concurrent use.
type Publisher struct {
	cfg     Config
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	dups    atomic.Int64

	mu     sync.RWMutex // held shared while sending, exclusively by Close
	closed bool
	done   chan struct{} // closed by Close: awaiting Publish calls give up
}

var _ publishers.Publisher = (*Publisher)(nil)

// New connects to cfg.URL (unless cfg.Conn is set) and returns a Publisher.
//
// The connection it makes reconnects forever, every cfg.ReconnectWait, and
// does not buffer while disconnected (nats.ReconnectBufSize(-1)): a publish
// during an outage fails at once as unavailable instead of piling up, and
// the same Publisher publishes again once the server is back. A connection
// passed in cfg.Conn should be made with nats.MaxReconnects(-1) and
// nats.ReconnectBufSize(-1) for the same behaviour.
func New(cfg Config) (*Publisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: cfg, nc: cfg.Conn, done: make(chan struct{})}
	if p.nc == nil {
		nc, err := nats.Connect(cfg.URL, p.connOptions()...)
		if err != nil {
			return nil, fmt.Errorf("nats publisher: connect to %s: %w", redact(cfg.URL), err)
		}
		p.nc, p.ownConn = nc, true
	}
	js, err := jetstream.New(p.nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
	)
	if err != nil {
		if p.ownConn {
			p.nc.Close()
		}
		return nil, fmt.Errorf("nats publisher: %w", err)
	}
	p.js = js
	return p, nil
}

func (p *Publisher) connOptions() []nats.Option {
	log := p.cfg.Logger.With("url", redact(p.cfg.URL))
	opts := []nats.Option{
		nats.Name(p.cfg.Name),
		nats.Timeout(p.cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(p.cfg.ReconnectWait),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("nats publisher disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats publisher reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats publisher async error", "err", err)
		}),
	}
	return append(opts, p.cfg.Options...)
}

// Capabilities: JetStream drops a re-sent Nats-Msg-Id within the stream's
// duplicate window; a failed publish is not retried in order.
func (p *Publisher) Capabilities() publishers.Capabilities {
	return publishers.Capabilities{Dedup: true, OrderedRetries: false}
}

// Duplicates returns how many publishes JetStream acknowledged as
// duplicates (dropped by the stream's duplicate window) since New.
func (p *Publisher) Duplicates() int64 { return p.dups.Load() }

// Conn returns the connection the Publisher publishes on.
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// Publish publishes msgs asynchronously, all in flight at once, then waits
// for every acknowledgement or for ctx to end. It returns one error per
// message, nil when JetStream stored it (or dropped it as a duplicate of
// one it stored). Errors are classified as publishers.Permanent (too large,
// invalid subject or header: never sent), publishers.Unavailable (no
// connection, no JetStream, no acknowledgement in time) or left unmarked
// (JetStream refused this message; retry it).
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	c := &call{p: p, ctx: ctx, msgs: msgs, errs: make([]error, len(msgs))}
	futs := c.send()
	c.await(futs)
	return c.errs
}

// call is one Publish call.
type call struct {
	p    *Publisher
	ctx  context.Context
	msgs []outbox.Message
	errs []error

	jsChecked bool  // noStream asked JetStream whether it is up
	jsErr     error // and this is what it said
}

// send publishes every message that passes the checks and returns their
// futures (nil where errs is set).
func (c *call) send() []jetstream.PubAckFuture {
	p, ctx, msgs, errs := c.p, c.ctx, c.msgs, c.errs
	futs := make([]jetstream.PubAckFuture, len(msgs))
	p.mu.RLock()
	defer p.mu.RUnlock()
	maxPayload := int(p.nc.MaxPayload())
	var down error // once sending fails for want of a broker, stop trying
	for i := range msgs {
		m := &msgs[i]
		if p.closed {
			errs[i] = publishers.Unavailable(ErrClosed)
			continue
		}
		if err := ctx.Err(); err != nil {
			errs[i] = publishers.Unavailable(fmt.Errorf("nats publish %s: not sent: %w", m.ID, err))
			continue
		}
		if down != nil {
			errs[i] = publishers.Unavailable(fmt.Errorf("nats publish %s: not sent after an earlier message failed: %w", m.ID, down))
			continue
		}
		nm, size, err := p.natsMsg(m)
		if err == nil && maxPayload > 0 && size > maxPayload {
			err = fmt.Errorf("%w: %d bytes with headers, server limit %d", nats.ErrMaxPayload, size, maxPayload)
		}
		if err == nil {
			futs[i], err = p.js.PublishMsgAsync(nm, jetstream.WithStallWait(p.stallWait(ctx)))
		}
		if err != nil {
			errs[i] = c.wrap(m, err)
			if publishers.IsUnavailable(errs[i]) {
				down = err
			}
		}
	}
	return futs
}

// stallWait is how long PublishMsgAsync may block when MaxPending
// publishes wait for their acknowledgement already.
func (p *Publisher) stallWait(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		if left := time.Until(d); left > 0 {
			return left
		}
		return time.Millisecond
	}
	return p.cfg.AckTimeout
}

// await fills errs from futs.
func (c *call) await(futs []jetstream.PubAckFuture) {
	for i, f := range futs {
		if f == nil {
			continue
		}
		ack, err := wait(c.ctx, c.p.done, f)
		if err != nil {
			c.errs[i] = c.wrap(&c.msgs[i], err)
			continue
		}
		if ack.Duplicate {
			c.p.dups.Add(1)
		}
	}
}

// wait returns f's outcome, preferring one that is in over ctx's end or
// the publisher's.
func wait(ctx context.Context, done <-chan struct{}, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	okc, errc := f.Ok(), f.Err()
	select {
	case ack := <-okc:
		return ack, nil
	case err := <-errc:
		return nil, err
	default:
	}
	select {
	case ack := <-okc:
		return ack, nil
	case err := <-errc:
		return nil, err
	case <-ctx.Done():
		return nil, fmt.Errorf("no acknowledgement before the context ended: %w", ctx.Err())
	case <-done:
		return nil, fmt.Errorf("no acknowledgement before Close: %w", ErrClosed)
	}
}

// wrap describes and classifies the error of publishing m.
func (c *call) wrap(m *outbox.Message, err error) error {
	err = fmt.Errorf("nats publish %s to %q: %w", m.ID, c.p.subject(m.Topic), err)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		return c.noStream(err)
	}
	return classify(err)
}

// noStream classifies "no response from stream": unavailable when the
// connection or JetStream is down, else no stream captures the subject,
// which only the operator can fix (unmarked: retried, counted).
// JetStream is asked once per call.
func (c *call) noStream(err error) error {
	if !c.p.nc.IsConnected() {
		return publishers.Unavailable(err)
	}
	if !c.jsChecked {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Second)
		_, c.jsErr = c.p.js.AccountInfo(ctx)
		cancel()
		c.jsChecked = true
	}
	if c.jsErr != nil {
		return publishers.Unavailable(fmt.Errorf("%w (JetStream: %v)", err, c.jsErr))
	}
	return fmt.Errorf("%w: does a stream capture the subject?", err)
}

// Close closes the connection when New made it, or else removes the
// publisher's subscription from the caller's connection. Publish calls
// still waiting for acknowledgements return at once, their messages failed
// as unavailable (ErrClosed). Calling Close again does nothing.
//
// With Config.Conn, a race in nats.go v1.55.0 (jetstream CleanupPublisher
// running before the goroutine the first Publish started has read its
// status channel) can leave that goroutine blocked for good when Close
// follows the first Publish at once. A connection New made has no such
// problem: closing it ends the goroutine.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	close(p.done)
	if p.ownConn {
		// Closing the connection ends the jetstream package's goroutine.
		// CleanupPublisher is not called here: in nats.go v1.55.0, called
		// before that goroutine first runs, it leaves it blocked forever.
		p.nc.Close()
		return nil
	}
	p.js.CleanupPublisher()
	return nil
}
