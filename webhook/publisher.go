package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close (unavailable).
	ErrClosed = errors.New("webhook publisher closed")
	// ErrTooLarge: the payload exceeds Config.MaxPayload (permanent).
	ErrTooLarge = errors.New("message too large")
	// ErrNoEndpoint: neither Config.Endpoints nor Config.Endpoint gives
	// the topic a URL (misconfigured).
	ErrNoEndpoint = errors.New("no endpoint for the topic")
)

// Publisher posts outbox messages to HTTP endpoints, signed as Standard
// Webhooks. It is safe for concurrent use.
type Publisher struct {
	cfg       Config
	log       *slog.Logger
	def       *endpoint
	per       map[string]*endpoint
	keys      [][]byte
	guard     *guard
	transport *http.Transport
	client    *http.Client

	closing context.Context // done once Close starts: in-flight requests end
	cancel  context.CancelFunc

	mu     sync.RWMutex // held shared while publishing, exclusively by Close
	closed bool

	semMu sync.Mutex
	sems  map[string]chan struct{} // per endpoint host: MaxInFlight slots
}

var _ publishers.Publisher = (*Publisher)(nil)

// New returns a Publisher configured by cfg. It checks the configuration
// but does not connect: Check proves the endpoints before the first
// publish. Its error is classified publishers.Misconfigured.
func New(cfg *Config) (*Publisher, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	def, per, keys, err := c.validate()
	if err != nil {
		return nil, publishers.Misconfigured(err)
	}
	g := &guard{allowPrivate: c.AllowPrivate, allow: c.AllowCIDRs}
	dialer := &net.Dialer{Timeout: c.Timeout, KeepAlive: 30 * time.Second, Control: g.control}
	tr := &http.Transport{
		Proxy:                 nil, // the guard checks the address dialed: no proxy from the environment
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * c.MaxInFlight,
		MaxIdleConnsPerHost:   c.MaxInFlight,
		MaxConnsPerHost:       c.MaxInFlight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   c.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	if c.TLS != nil {
		tr.TLSClientConfig = c.TLS.Clone()
	}
	p := &Publisher{
		cfg: c, log: c.Logger, def: def, per: per, keys: keys, guard: g, transport: tr,
		client: &http.Client{
			Transport: tr,
			// Redirects are never followed: a 3xx fails as permanent,
			// naming its Location.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		sems: map[string]chan struct{}{},
	}
	p.closing, p.cancel = context.WithCancel(context.Background())
	if len(keys) == 0 {
		p.log.Warn("webhook publisher: no secret: requests go unsigned, which Standard Webhooks receivers refuse")
	}
	return p, nil
}

// endpointOf returns the endpoint of topic.
func (p *Publisher) endpointOf(topic string) *endpoint {
	if e, ok := p.per[topic]; ok {
		return e
	}
	return p.def
}

// slots returns the semaphore of host.
func (p *Publisher) slots(host string) chan struct{} {
	p.semMu.Lock()
	defer p.semMu.Unlock()
	s, ok := p.sems[host]
	if !ok {
		s = make(chan struct{}, p.cfg.MaxInFlight)
		p.sems[host] = s
	}
	return s
}

// Publish posts msgs, those of different keys (and those without a key)
// concurrently, those of one key one after the other in batch order, and
// returns one error per message: nil when the endpoint answered 2xx. Once
// a message of a key fails other than permanently, the later messages of
// that key in the call are not sent and fail too, so that none is stored
// before it. See the package documentation for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("webhook post %s: %w", msgs[i].ID, ErrClosed))
		}
		return errs
	}
	// Chains: the messages of one key, in batch order; a message without
	// a key is a chain of its own. Each host (of a chain's first message)
	// gets as many workers as it has slots, at most, taking chains in
	// order: no goroutine per message waits for a slot.
	var chains [][]int
	byKey := map[string]int{}
	for i := range msgs {
		k := msgs[i].Key
		if c, ok := byKey[k]; ok && k != "" {
			chains[c] = append(chains[c], i)
			continue
		}
		byKey[k] = len(chains)
		chains = append(chains, []int{i})
	}
	perHost := map[string][][]int{}
	var hosts []string
	for _, c := range chains {
		h := ""
		if e := p.endpointOf(msgs[c[0]].Topic); e != nil {
			h = e.u.Host
		}
		if _, ok := perHost[h]; !ok {
			hosts = append(hosts, h)
		}
		perHost[h] = append(perHost[h], c)
	}
	var wg sync.WaitGroup
	for _, h := range hosts {
		queue := make(chan []int, len(perHost[h]))
		for _, c := range perHost[h] {
			queue <- c
		}
		close(queue)
		for range min(len(perHost[h]), p.cfg.MaxInFlight) {
			wg.Go(func() {
				for c := range queue {
					p.chain(ctx, msgs, c, errs)
				}
			})
		}
	}
	wg.Wait()
	return errs
}

// chain posts the messages of c, one key's, one after the other; after
// a failure other than permanent the later ones are not sent.
func (p *Publisher) chain(ctx context.Context, msgs []outbox.Message, c []int, errs []error) {
	var blocked error
	for _, i := range c {
		if blocked != nil {
			errs[i] = notSent(msgs[i].ID, blocked)
			continue
		}
		errs[i] = p.post(ctx, &msgs[i])
		if errs[i] != nil && !publishers.IsPermanent(errs[i]) {
			blocked = errs[i]
		}
	}
}

// notSent is the error of a message not sent because an earlier one of
// its key failed with blocked: of blocked's class, but never permanent.
func notSent(id fmt.Stringer, blocked error) error {
	err := fmt.Errorf("webhook post %s: not sent: an earlier message of its key failed: %v", id, blocked)
	switch {
	case publishers.IsMisconfigured(blocked):
		return publishers.Misconfigured(err)
	case publishers.IsUnavailable(blocked):
		return publishers.Unavailable(err)
	}
	return err
}

// post sends one message and classifies the outcome.
func (p *Publisher) post(ctx context.Context, m *outbox.Message) error {
	fail := func(classify func(error) error, format string, args ...any) error {
		return classify(fmt.Errorf("webhook post %s: %s", m.ID, fmt.Sprintf(format, args...)))
	}
	if err := ctx.Err(); err != nil {
		return fail(publishers.Unavailable, "not sent: %v", err)
	}
	e := p.endpointOf(m.Topic)
	if e == nil {
		return publishers.Misconfigured(fmt.Errorf("webhook post %s: topic %q: %w (set Endpoint, or Endpoints[%q])", m.ID, m.Topic, ErrNoEndpoint, m.Topic))
	}
	if p.cfg.MaxPayload > 0 && len(m.Payload) > p.cfg.MaxPayload {
		return publishers.Permanent(fmt.Errorf("webhook post %s: %w: %d bytes, limit %d", m.ID, ErrTooLarge, len(m.Payload), p.cfg.MaxPayload))
	}
	h, err := headers(m, p.cfg.ContentType)
	if err != nil {
		return fail(publishers.Permanent, "%v", err)
	}
	target := e.forTopic(m.Topic)
	shown := redact.URL(target)
	sem := p.slots(e.u.Host)
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return fail(publishers.Unavailable, "to %s: not sent: waited for a free slot: %v", shown, ctx.Err())
	case <-p.closing.Done():
		return fail(publishers.Unavailable, "to %s: not sent: %v", shown, ErrClosed)
	}
	// The attempt's time: once a slot is free, just before sending.
	ts := p.cfg.Clock.Now().Unix()
	h[HeaderTimestamp] = []string{strconv.FormatInt(ts, 10)}
	sign(h, p.keys, m.ID.String(), ts, m.Payload)

	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	stop := context.AfterFunc(p.closing, cancel)
	defer stop()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(m.Payload))
	if err != nil {
		return fail(publishers.Misconfigured, "to %s: %v", shown, redact.Text(err.Error()))
	}
	req.Header = h
	if e.hasUser {
		req.SetBasicAuth(e.user, e.pass)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return transportError(fmt.Errorf("webhook post %s to %s", m.ID, shown), err, ctx, p.closing)
	}
	defer func() { _ = resp.Body.Close() }()
	return responseError(fmt.Errorf("webhook post %s to %s", m.ID, shown), resp)
}

// Close ends the requests in flight (they fail as unavailable), waits for
// the Publish calls to return, and closes the idle connections. Calling
// Close again does nothing.
func (p *Publisher) Close() error {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.transport.CloseIdleConnections()
	return nil
}
