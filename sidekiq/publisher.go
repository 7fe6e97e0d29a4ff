package sidekiq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close (unavailable).
	ErrClosed = errors.New("sidekiq publisher closed")
	// ErrTooLarge: the job's JSON exceeds PublisherConfig.MaxPayload
	// (permanent).
	ErrTooLarge = errors.New("job too large")
	// ErrNoClass: the topic has no job class — no Route names one and
	// PublisherConfig.Class is empty (permanent).
	ErrNoClass = errors.New("no Sidekiq job class for the topic")
)

// Publisher pushes outbox messages to Sidekiq queues in Redis, as
// Sidekiq's own client does. It is safe for concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	routes    map[string]target // resolved Routes with a class
	def       target            // the default target
	defOK     bool              // whether def has a class
	log       *slog.Logger
	rdb       goredis.UniversalClient
	ownClient bool

	mu     sync.RWMutex // held shared while sending, exclusively by Close
	closed bool
}

var _ publishers.Publisher = (*Publisher)(nil)

// NewPublisher returns a Publisher configured by cfg (nil: every
// default). It makes a client from cfg.URL unless cfg.Client is set; it
// does not wait for Redis to answer, so it succeeds while Redis is down
// (Publish fails as unavailable until it is up) and when Redis refuses the
// configuration (Publish fails as misconfigured): Check tells these apart
// before the first publish.
func NewPublisher(cfg *PublisherConfig) (*Publisher, error) {
	var c PublisherConfig
	if cfg != nil {
		c = *cfg
	}
	c = c.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{cfg: c, log: c.Logger, rdb: c.Client}
	p.routes, p.def, p.defOK = c.targets()
	if p.rdb == nil {
		opts, err := options(c.URL)
		if err != nil {
			return nil, err
		}
		p.rdb, p.ownClient = goredis.NewClient(opts), true
	}
	return p, nil
}

// Client returns the client the Publisher publishes with.
func (p *Publisher) Client() goredis.UniversalClient { return p.rdb }

// queuePush is one queue's jobs of a batch, pushed in one transaction:
// MULTI, SADD queues QUEUE, an LPUSH per job in batch order, EXEC.
type queuePush struct {
	queue  string
	msgs   []int          // indexes in the batch, in order
	jobs   [][]byte       // their jobs
	multi  *goredis.Cmd   // MULTI
	sadd   *goredis.Cmd   // SADD, queued
	lpush  []*goredis.Cmd // each job's LPUSH, queued
	exec   *goredis.Cmd   // EXEC
	failed error          // what fails the whole transaction, once evaluated
}

// Publish pushes msgs as Sidekiq jobs in one pipeline and returns one
// error per message, nil when Redis stored its job. See the package
// documentation for the mapping and for how errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sidekiq publish %s: %w", msgs[i].ID, ErrClosed))
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("sidekiq publish %s: not sent: %w", msgs[i].ID, err))
		}
		return errs
	}
	now := p.cfg.Clock.Now()
	var groups []*queuePush
	byQueue := map[string]*queuePush{}
	scheduled := map[int][]byte{}
	for i := range msgs {
		m := &msgs[i]
		t, ok := p.routes[m.Topic]
		if _, routed := p.cfg.Routes[m.Topic]; !routed {
			t, ok = p.def, p.defOK
		}
		if !ok {
			errs[i] = publishers.Permanent(fmt.Errorf("sidekiq publish %s: topic %q: %w (add a Route for it, or set a default class)", m.ID, m.Topic, ErrNoClass))
			continue
		}
		later := m.NotBefore.After(now)
		enqueued := now
		if later {
			enqueued = time.Time{}
		}
		job, err := encodeJob(m, t, now, enqueued)
		if err != nil {
			errs[i] = publishers.Permanent(fmt.Errorf("sidekiq publish %s: %w", m.ID, err))
			continue
		}
		if len(job) > p.cfg.MaxPayload {
			errs[i] = publishers.Permanent(fmt.Errorf("sidekiq publish %s: %w: %d bytes of JSON, limit %d", m.ID, ErrTooLarge, len(job), p.cfg.MaxPayload))
			continue
		}
		if later {
			scheduled[i] = job
			continue
		}
		g := byQueue[t.queue]
		if g == nil {
			g = &queuePush{queue: t.queue}
			byQueue[t.queue] = g
			groups = append(groups, g)
		}
		g.msgs, g.jobs = append(g.msgs, i), append(g.jobs, job)
	}
	if len(groups) == 0 && len(scheduled) == 0 {
		return errs
	}
	pipe := p.rdb.Pipeline()
	for _, g := range groups {
		g.multi = pipe.Do(ctx, "MULTI")
		g.sadd = pipe.Do(ctx, "SADD", p.cfg.key("queues"), g.queue)
		key := p.cfg.key("queue:" + g.queue)
		for _, job := range g.jobs {
			g.lpush = append(g.lpush, pipe.Do(ctx, "LPUSH", key, job))
		}
		g.exec = pipe.Do(ctx, "EXEC")
	}
	zadds := make(map[int]*goredis.Cmd, len(scheduled))
	for i := range msgs { // in batch order
		if job, ok := scheduled[i]; ok {
			at := strconv.FormatFloat(unixSeconds(msgs[i].NotBefore), 'f', -1, 64)
			zadds[i] = pipe.Do(ctx, "ZADD", p.cfg.key("schedule"), at, job)
		}
	}
	// Exec fails as a whole when the connection could not be set up (a
	// refused AUTH or SELECT, an unreachable server): then no command was
	// sent, and a command with no error of its own must still not count.
	_, execErr := pipe.Exec(ctx)
	fail := func(i int, where string, err error) {
		errs[i] = classify(fmt.Errorf("sidekiq publish %s to %s: %w", msgs[i].ID, where, err))
	}
	for _, g := range groups {
		where := "queue " + strconv.Quote(g.queue)
		for k, i := range g.msgs {
			if err := g.result(k, execErr); err != nil {
				fail(i, where, err)
			}
		}
	}
	for i, z := range zadds {
		err := z.Err()
		if _, ok := z.Val().(int64); err == nil && !ok {
			err = notPushed("ZADD", z.Val(), execErr)
		}
		if err != nil {
			fail(i, "the schedule set", err)
		}
	}
	return errs
}

// errNotPushed: Redis answered a push with something else than the
// replies that say the job is stored.
var errNotPushed = errors.New("not pushed")

// notPushed is the error of a command that returned what, not a count: the
// pipeline's error when there is one (the command was never answered).
func notPushed(what string, reply any, execErr error) error {
	if execErr != nil {
		return fmt.Errorf("%w: %w", errNotPushed, execErr)
	}
	return fmt.Errorf("%w: %s replied %v", errNotPushed, what, reply)
}

// result is nil when the k-th job of the transaction is stored: EXEC
// returned SADD's count and that LPUSH's. A command refused when queued
// (NOPERM) makes Redis discard the whole transaction (EXECABORT): the
// command's own error is the error of every job, and none was stored. A
// command that fails when EXEC runs it (WRONGTYPE) fails alone — the
// SADD's error fails every job of the queue, although their LPUSHes may
// have stored them.
func (g *queuePush) result(k int, execErr error) error {
	if g.failed == nil {
		g.failed = g.transactionError(execErr)
	}
	if !errors.Is(g.failed, errNone) {
		return g.failed
	}
	replies := g.exec.Val().([]any) // checked by transactionError
	switch r := replies[1+k].(type) {
	case int64:
		return nil
	case error:
		return fmt.Errorf("LPUSH: %w", r)
	default:
		return notPushed("LPUSH", r, execErr)
	}
}

// errNone marks a transaction that EXEC ran.
var errNone = errors.New("no error")

// transactionError is what failed g's transaction as a whole, errNone when
// EXEC ran it and its SADD succeeded.
func (g *queuePush) transactionError(execErr error) error {
	if err := g.multi.Err(); err != nil {
		return fmt.Errorf("MULTI: %w", err)
	}
	if err := g.sadd.Err(); err != nil {
		return fmt.Errorf("SADD: %w", err)
	}
	for _, c := range g.lpush {
		if err := c.Err(); err != nil {
			return fmt.Errorf("LPUSH: %w", err)
		}
	}
	if err := g.exec.Err(); err != nil {
		return err
	}
	replies, ok := g.exec.Val().([]any)
	if !ok || len(replies) != 1+len(g.lpush) {
		return notPushed("EXEC", g.exec.Val(), execErr)
	}
	switch r := replies[0].(type) {
	case int64:
		return errNone
	case error:
		return fmt.Errorf("SADD: %w", r)
	default:
		return notPushed("SADD", r, execErr)
	}
}

// Close closes the client when NewPublisher made it. Calling Close again
// does nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.ownClient {
		if err := p.rdb.Close(); err != nil && !errors.Is(err, goredis.ErrClosed) {
			return fmt.Errorf("sidekiq publisher: close: %w", err)
		}
	}
	return nil
}
