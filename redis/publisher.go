package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Errors of a message, wrapped with its details.
var (
	// ErrClosed: published after Close (unavailable).
	ErrClosed = errors.New("redis publisher closed")
	// ErrTooLarge: the payload, or the headers' JSON, exceeds
	// PublisherConfig.MaxPayload (permanent).
	ErrTooLarge = errors.New("message too large")
)

// Publisher publishes outbox messages to Redis Streams. It is safe for
// concurrent use.
type Publisher struct {
	cfg       PublisherConfig
	log       *slog.Logger
	rdb       goredis.UniversalClient
	ownClient bool

	keyRuns   atomic.Int32           // runsUnknown until KeepsKeyOrder found out
	noRunsWhy atomic.Pointer[string] // why KeepsKeyOrder last said no, once logged

	mu     sync.RWMutex // held shared while sending, exclusively by Close
	closed bool
}

var (
	_ publishers.Publisher   = (*Publisher)(nil)
	_ publishers.OrderKeeper = (*Publisher)(nil)
)

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

// stream maps a topic to a stream key.
func (p *Publisher) stream(topic string) string {
	if p.cfg.Stream != nil {
		return p.cfg.Stream(topic)
	}
	return p.cfg.StreamPrefix + topic
}

// Publish appends msgs to their streams in one pipeline and returns one
// error per message, nil when Redis appended it. Once KeepsKeyOrder has
// said yes, the messages of a key that has more than one in the call go
// as one run (the script appendRun, in the same pipeline), which stops at
// the first that fails: the key's later messages fail as
// publishers.NotSent, unsent. See the package documentation for how
// errors are classified.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	if len(msgs) == 0 {
		return errs
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("redis publish %s: %w", msgs[i].ID, ErrClosed))
		}
		return errs
	}
	if err := ctx.Err(); err != nil {
		for i := range msgs {
			errs[i] = publishers.Unavailable(fmt.Errorf("redis publish %s: not sent: %w", msgs[i].ID, err))
		}
		return errs
	}
	runs := p.keyRuns.Load() == runsOn
	vals := make([][]any, len(msgs))
	var keyed map[string][]int // with runs: each key's messages to send, in order
	var failed map[string]int  // with runs: a key's first message refused here
	var keys []string          // with runs: the keys of keyed, in call order
	if runs {
		keyed, failed = make(map[string][]int), make(map[string]int)
	}
	pipe := p.rdb.Pipeline()
	cmds := make([]*goredis.StringCmd, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if first, ok := failed[m.Key]; ok {
			errs[i] = publishers.NotSentAfter(fmt.Sprintf("redis publish %s", m.ID), errs[first])
			continue
		}
		if vals[i], errs[i] = p.fields(m); errs[i] != nil {
			if runs && m.Key != "" {
				failed[m.Key] = i
			}
			continue
		}
		if runs && m.Key != "" {
			if _, ok := keyed[m.Key]; !ok {
				keys = append(keys, m.Key)
			}
			keyed[m.Key] = append(keyed[m.Key], i)
			continue
		}
		cmds[i] = p.xadd(ctx, pipe, m, vals[i])
	}
	var queued []run
	for _, k := range keys {
		idx := keyed[k]
		if len(idx) == 1 {
			cmds[idx[0]] = p.xadd(ctx, pipe, &msgs[idx[0]], vals[idx[0]])
			continue
		}
		queued = append(queued, p.queueRun(ctx, pipe, msgs, idx, vals))
	}
	if pipe.Len() == 0 {
		return errs
	}
	// Exec fails as a whole when the connection could not be set up
	// (a refused AUTH or SELECT, an unreachable server): then no command
	// was sent, and a command with no error of its own must still not
	// count. Only an XADD that returned an entry ID appended its entry.
	_, execErr := pipe.Exec(ctx)
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		err := cmd.Err()
		if err == nil && !isEntryID(cmd.Val()) {
			err = notAppended(cmd.Val(), execErr)
		}
		if err != nil {
			errs[i] = classify(fmt.Errorf("redis publish %s to stream %q: %w", msgs[i].ID, p.stream(msgs[i].Topic), err))
		}
	}
	for _, r := range queued {
		p.result(r, msgs, errs, execErr)
	}
	return errs
}

// fields returns the fields of m's entry (see values), or the error of a
// message the publisher does not send: a payload or headers too large,
// or headers that do not marshal (permanent).
func (p *Publisher) fields(m *outbox.Message) ([]any, error) {
	if len(m.Payload) > p.cfg.MaxPayload {
		return nil, publishers.Permanent(fmt.Errorf("redis publish %s: %w: %d bytes, limit %d", m.ID, ErrTooLarge, len(m.Payload), p.cfg.MaxPayload))
	}
	headers, err := headersField(m)
	if err != nil {
		return nil, publishers.Permanent(fmt.Errorf("redis publish %s: headers: %w", m.ID, err))
	}
	// The headers are one bulk string too: over the server's
	// proto-max-bulk-len, Redis would close the connection, failing the
	// whole pipeline as an outage at every retry.
	if len(headers) > p.cfg.MaxPayload {
		return nil, publishers.Permanent(fmt.Errorf("redis publish %s: %w: headers are %d bytes of JSON, limit %d", m.ID, ErrTooLarge, len(headers), p.cfg.MaxPayload))
	}
	return values(m, headers), nil
}

// xadd queues the XADD of m, whose fields are vals.
func (p *Publisher) xadd(ctx context.Context, pipe goredis.Pipeliner, m *outbox.Message, vals []any) *goredis.StringCmd {
	args := &goredis.XAddArgs{Stream: p.stream(m.Topic), ID: "*", Values: vals}
	if p.cfg.MaxLen > 0 {
		args.MaxLen, args.Approx = p.cfg.MaxLen, true
	}
	return pipe.XAdd(ctx, args)
}

// notAppended is the error of an XADD that returned no entry ID: reply is
// what it returned instead, execErr the pipeline's error.
func notAppended(reply string, execErr error) error {
	if execErr != nil {
		return fmt.Errorf("%w: %w", errNotAppended, execErr)
	}
	return fmt.Errorf("%w: reply %q", errNotAppended, reply)
}

// errNotAppended: an XADD of the pipeline returned no entry ID.
var errNotAppended = errors.New("not appended (Redis returned no entry ID)")

// isEntryID reports whether s is a stream entry ID, "<ms>-<seq>".
func isEntryID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	return ok && digits(ms) && digits(seq)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Close closes the client when NewPublisher made it. Calling Close again does
// nothing.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.ownClient {
		if err := p.rdb.Close(); err != nil && !errors.Is(err, goredis.ErrClosed) {
			return fmt.Errorf("redis publisher: close: %w", err)
		}
	}
	return nil
}
