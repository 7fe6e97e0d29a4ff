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
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// Publisher publishes outbox messages to NATS JetStream. It is safe for
// concurrent use.
type Publisher struct {
	cfg     PublisherConfig
	nc      *nats.Conn
	ownConn bool
	js      jetstream.JetStream
	acks    atomic.Pointer[acker] // set once by NewPublisher
	dups    atomic.Int64

	keyRuns    atomic.Int32                // AtomicKeyRuns, FastKeyRuns: runsUnknown until KeepsKeyOrder checked the streams
	noRunsWhy  atomic.Pointer[string]      // FastKeyRuns by default: why KeepsKeyOrder last said no, once logged
	batchSlots chan struct{}               // one per batch awaiting its commit's acknowledgement
	minRun     atomic.Int64                // the shortest run sent as an atomic batch; set before keyRuns turns runsOn
	routes     atomic.Pointer[[]fastRoute] // FastKeyRuns: the streams; set before keyRuns turns runsOn
	fastWarned atomic.Bool                 // a stream refused a fast-ingest batch as a batch: said once

	denyMu sync.Mutex // orders the connection's reports of denials against NewPublisher setting acks
	early  []func(*acker)

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close: awaiting Publish calls give up
}

var (
	_ publishers.Publisher   = (*Publisher)(nil)
	_ publishers.Checker     = (*Publisher)(nil)
	_ publishers.OrderKeeper = (*Publisher)(nil)
)

// NewPublisher connects to cfg.URL (unless cfg.Conn is set) and returns a
// Publisher. A nil cfg means every default. It does not create
// cfg.Stream: SetupStream does.
//
// The connection it makes reconnects forever, every cfg.ReconnectWait, and
// does not buffer while disconnected (nats.ReconnectBufSize(-1)): a publish
// during an outage fails at once as unavailable instead of piling up, and
// the same Publisher publishes again once the server is back. A connection
// passed in cfg.Conn should be made with nats.MaxReconnects(-1) and
// nats.ReconnectBufSize(-1) for the same behaviour.
//
// A server that refuses the credentials (authorization violation) fails
// NewPublisher with an error classified publishers.Misconfigured; one that
// cannot be reached, with one classified publishers.Unavailable. Errors
// name the URL with its secrets hidden.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, nc: c.Conn, done: make(chan struct{}), batchSlots: make(chan struct{}, maxAtomicBatches)}
	if p.nc == nil {
		nc, err := nats.Connect(c.URL, p.connOptions()...)
		if err != nil {
			return nil, connError(c.URL, err)
		}
		p.nc, p.ownConn = nc, true
	}
	fail := func(err error) (*Publisher, error) {
		if p.ownConn {
			p.nc.Close()
		}
		return nil, classify(fmt.Errorf("nats publisher: %w", err))
	}
	js, err := jetstream.New(p.nc)
	if err != nil {
		return fail(err)
	}
	p.js = js
	a, err := newAcker(p.nc, c.MaxPending, c.AckTimeout, c.fastRuns())
	if err != nil {
		return fail(err)
	}
	p.denyMu.Lock()
	p.acks.Store(a)
	for _, f := range p.early {
		f(a)
	}
	p.early = nil
	p.denyMu.Unlock()
	return p, nil
}

func (p *Publisher) connOptions() []nats.Option {
	log := p.cfg.Logger.With("url", redact.URL(p.cfg.URL))
	opts := []nats.Option{
		nats.Name(p.cfg.Name),
		nats.Timeout(p.cfg.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(p.cfg.ReconnectWait),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil { // Close
				log.Debug("nats publisher disconnected")
				return
			}
			log.Warn("nats publisher disconnected", "err", errText(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats publisher reconnected", "server", redact.URL(nc.ConnectedUrlRedacted()))
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); authRefusal(err) {
				log.Error("nats publisher: the server refused the credentials; the connection is closed for good", "err", errText(err))
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if subj, replies, ok := permissionDenied(err); ok {
				log.Error("nats publisher: permission denied", "subject", subj, "err", errText(err))
				p.withAcker(func(a *acker) { a.deny(subj, replies, refused(err)) })
				return
			}
			log.Warn("nats publisher async error", "err", errText(err))
		}),
	}
	return append(opts, p.cfg.Options...)
}

// withAcker runs f on the acker, now or, before NewPublisher has made it,
// then.
func (p *Publisher) withAcker(f func(*acker)) {
	p.denyMu.Lock()
	defer p.denyMu.Unlock()
	if a := p.acks.Load(); a != nil {
		f(a)
		return
	}
	p.early = append(p.early, f)
}

// errText is err's text with the secrets of any URL in it hidden.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return redact.Text(err.Error())
}

// Duplicates returns how many publishes JetStream acknowledged as
// duplicates (dropped by the stream's duplicate window) since
// NewPublisher.
func (p *Publisher) Duplicates() int64 { return p.dups.Load() }

// Conn returns the connection the Publisher publishes on.
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// Check asks JetStream for the account's information: nil when the server
// accepts the credentials and JetStream is enabled for the account; an
// error classified publishers.Misconfigured when the server refused the
// credentials or the account has no JetStream (or the server none at
// all); one classified publishers.Unavailable when the server cannot be
// reached or does not answer before ctx ends.
func (p *Publisher) Check(ctx context.Context) error {
	if p.closed.Load() {
		return publishers.Unavailable(fmt.Errorf("nats publisher: check: %w", ErrClosed))
	}
	if err := p.connLost(); err != nil {
		return classify(fmt.Errorf("nats publisher: check: %w", err))
	}
	if err := p.acks.Load().refusal(); err != nil {
		return fmt.Errorf("nats publisher: check: %w", err)
	}
	err := p.acks.Load().request(ctx, func(ctx context.Context) error {
		_, err := p.js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		return classify(fmt.Errorf("nats publisher: check JetStream at %s: %w", p.where(), err))
	}
	return nil
}

// connLost returns why the connection is not up, nil when it is: the
// server's refusal of the credentials when that is what closed it.
func (p *Publisher) connLost() error {
	if p.nc.IsConnected() {
		return nil
	}
	if last := p.nc.LastError(); authRefusal(last) {
		return fmt.Errorf("not connected to %s: the server refused the credentials: %w", p.where(), last)
	}
	if p.nc.IsClosed() {
		return fmt.Errorf("not connected to %s: %w", p.where(), nats.ErrConnectionClosed)
	}
	return fmt.Errorf("not connected to %s: %w", p.where(), nats.ErrConnectionReconnecting)
}

// where names the server, its secrets hidden.
func (p *Publisher) where() string {
	if u := p.nc.ConnectedUrlRedacted(); u != "" {
		return redact.URL(u)
	}
	if p.ownConn {
		return redact.URL(p.cfg.URL)
	}
	return "the NATS server"
}

// Publish publishes msgs asynchronously, all in flight at once, then waits
// for every acknowledgement or for ctx to end. It returns one error per
// message, nil when JetStream stored it (or dropped it as a duplicate of
// one it stored). See the package documentation for how errors are
// classified. Once KeepsKeyOrder has reported true (by default, or with
// PublisherConfig.AtomicKeyRuns), the messages go as fast-ingest or atomic
// batches and each key's keep their order whatever fails: see the package
// documentation, "Key order".
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	c := &call{p: p, ctx: ctx, msgs: msgs, errs: make([]error, len(msgs))}
	if p.keyRuns.Load() == runsOn {
		switch {
		case p.cfg.fastRuns() && len(msgs) < minFastBatch && noKeyTwice(len(msgs), func(i int) string { return msgs[i].Key }):
			// No order to keep within the call, and too few messages for
			// a batch to pay (see minFastBatch): plain publishes.
		case p.cfg.fastRuns():
			c.publishFast()
			return c.errs
		default:
			c.publishRuns()
			return c.errs
		}
	}
	pas := c.send()
	c.await(pas)
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
// pending acknowledgements (nil where errs is set).
func (c *call) send() []*pubAck {
	pas := make([]*pubAck, len(c.msgs))
	s := c.sender()
	for i := range c.msgs {
		pas[i] = s.one(i)
	}
	return pas
}

// sender sends a call's messages, one after the other.
type sender struct {
	c          *call
	acks       *acker
	maxPayload int
	down       error // once sending fails for want of a broker, stop trying
}

func (c *call) sender() *sender {
	return &sender{c: c, acks: c.p.acks.Load(), maxPayload: int(c.p.nc.MaxPayload())}
}

// unsendable returns why message i must not be sent at all (the publisher
// is closed, the context ended, the broker went away), or nil.
func (s *sender) unsendable(i int) error {
	c, m := s.c, &s.c.msgs[i]
	switch {
	case c.p.closed.Load():
		return publishers.Unavailable(fmt.Errorf("nats publish %s: %w", m.ID, ErrClosed))
	case c.ctx.Err() != nil:
		return publishers.Unavailable(fmt.Errorf("nats publish %s: not sent: %w", m.ID, c.ctx.Err()))
	case s.down != nil:
		return c.wrap(m, fmt.Errorf("not sent after an earlier message failed: %w", s.down))
	}
	return nil
}

// failed records err, message i's wrapped error, and stops sending when it
// says the broker is away or refuses the configuration.
func (s *sender) failed(i int, err error) {
	s.c.errs[i] = s.c.wrap(&s.c.msgs[i], err)
	if publishers.IsUnavailable(s.c.errs[i]) || publishers.IsMisconfigured(s.c.errs[i]) {
		s.down = err
	}
}

// one publishes message i when it passes the checks and returns its pending
// acknowledgement, or nil with errs[i] set.
func (s *sender) one(i int) *pubAck {
	c := s.c
	if err := s.unsendable(i); err != nil {
		c.errs[i] = err
		return nil
	}
	nm, err := s.build(i)
	var pa *pubAck
	if err == nil {
		pa, err = s.acks.send(c.ctx, nm, c.p.stallWait(c.ctx), nil)
	}
	if err != nil {
		s.failed(i, err)
		return nil
	}
	return pa
}

// build makes message i's NATS message, with extra headers (name, value
// pairs) added, and checks it against the server's max_payload.
func (s *sender) build(i int, extra ...string) (*nats.Msg, error) {
	nm, size, err := s.c.p.natsMsg(&s.c.msgs[i])
	if err != nil {
		return nil, err
	}
	for j := 0; j+1 < len(extra); j += 2 {
		nm.Header[extra[j]] = []string{extra[j+1]}
		size += len(extra[j]) + 2 + len(extra[j+1]) + 2
	}
	if s.maxPayload > 0 && size > s.maxPayload {
		return nil, fmt.Errorf("%w: %d bytes with headers, server limit %d", nats.ErrMaxPayload, size, s.maxPayload)
	}
	return nm, nil
}

// stallWait is how long a publish may wait for a slot when MaxPending
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

// await fills errs from pas.
func (c *call) await(pas []*pubAck) {
	expired := make(chan struct{}) // closed after AckTimeout: every wait left ends
	t := time.AfterFunc(c.p.cfg.AckTimeout, func() { close(expired) })
	defer t.Stop()
	for i, pa := range pas {
		if pa == nil {
			continue
		}
		ack, err := wait(c.ctx, c.p.done, expired, pa)
		if err != nil {
			c.errs[i] = c.wrap(&c.msgs[i], err)
			continue
		}
		if ack.Duplicate {
			c.p.dups.Add(1)
		}
	}
}

// wrap describes and classifies the error of publishing m.
func (c *call) wrap(m *outbox.Message, err error) error {
	if publishers.IsMisconfigured(err) {
		return fmt.Errorf("nats publish %s to %q: %w", m.ID, c.p.subject(m.Topic), err)
	}
	subject := c.p.subject(m.Topic)
	if errors.Is(err, ErrNoStream) {
		return c.noStream(m, subject)
	}
	// A connection the server closed for refusing the credentials is no
	// outage: it will not come back.
	if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) {
		if last := c.p.nc.LastError(); authRefusal(last) && !c.p.nc.IsConnected() {
			return classify(fmt.Errorf("nats publish %s to %q: the server refused the credentials (%w): %v", m.ID, subject, last, err))
		}
	}
	return classify(fmt.Errorf("nats publish %s to %q: %w", m.ID, subject, err))
}

// noStream classifies a publish no stream took: unavailable when the
// connection is down, misconfigured when JetStream is not enabled for the
// account, else — the server answers but no stream captures the subject —
// an unmarked error the relay retries and counts, which says so plainly.
// JetStream is asked once per call.
func (c *call) noStream(m *outbox.Message, subject string) error {
	if lost := c.p.connLost(); lost != nil {
		return classify(fmt.Errorf("nats publish %s to %q: no answer: %w", m.ID, subject, lost))
	}
	if !c.jsChecked {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 2*time.Second)
		c.jsErr = c.p.acks.Load().request(ctx, func(ctx context.Context) error {
			_, err := c.p.js.AccountInfo(ctx)
			return err
		})
		cancel()
		c.jsChecked = true
	}
	if c.jsErr != nil {
		return classify(fmt.Errorf("nats publish %s to %q: no answer from JetStream: %w", m.ID, subject, c.jsErr))
	}
	return redacted(fmt.Errorf("nats publish %s: %w %q (create one, e.g. with EnsureStream, PublisherConfig.Stream or `nats stream add`)", m.ID, ErrNoStream, subject))
}

// Close closes the connection when NewPublisher made it, or else removes the
// publisher's subscription from the caller's connection. Publish calls
// still waiting for acknowledgements return at once, their messages failed
// as unavailable (ErrClosed). Every goroutine the publisher started has
// returned when Close does. Calling Close again does nothing.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.done)
		p.acks.Load().close()
		if p.ownConn {
			p.nc.Close()
		}
	})
	return nil
}
