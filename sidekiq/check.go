package sidekiq

import (
	"context"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// Check verifies that Redis accepts the configuration: on a connection of
// its own (a client made from PublisherConfig.URL for this call, closed
// after it), the handshake — AUTH or HELLO with the URL's credentials,
// SELECT of its database — and a PING; then that the user may run every
// command a push sends, on the keys it sends them to, without storing
// anything: MULTI, then SADD to the queues set, LPUSH to each configured
// queue (PublisherConfig.Queue and every Route's) and ZADD to the
// schedule set, each with a probe value, then DISCARD. Redis checks a
// queued command's permissions, keys included, when it queues it, and
// DISCARD drops them.
//
// It returns an error classified publishers.Misconfigured when Redis
// refuses the credentials (WRONGPASS, NOAUTH, ERR AUTH …), the database
// (ERR DB index is out of range), MULTI (which every push needs) or a
// probe (NOPERM), and publishers.Unavailable when Redis cannot be reached.
//
// With PublisherConfig.Client set, Check sends a PING through that
// client, which proves the credentials only when the PING opens a new
// connection.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("sidekiq publisher: check: %w", ErrClosed))
	}
	if !p.ownClient {
		if err := p.rdb.Ping(ctx).Err(); err != nil {
			return classify(fmt.Errorf("sidekiq publisher: check: PING: %w", err))
		}
		return nil
	}
	where := redact.URL(p.cfg.URL)
	opts, err := options(p.cfg.URL)
	if err != nil {
		return err
	}
	// One connection is used. The pool has room for two: go-redis starts a
	// goroutine that redials in the background once PoolSize dials in a
	// row have failed, which would outlive Check against a server that is
	// down.
	opts.PoolSize, opts.MinIdleConns, opts.MaxIdleConns = 2, 0, 0
	c := goredis.NewClient(opts)
	defer func() { _ = c.Close() }()
	conn := c.Conn()
	defer func() { _ = conn.Close() }()
	if err := conn.Ping(ctx).Err(); err != nil {
		return classify(fmt.Errorf("sidekiq publisher: check %s: %w", where, err))
	}
	if err := conn.Do(ctx, "MULTI").Err(); err != nil {
		return classify(fmt.Errorf("sidekiq publisher: check %s: MULTI (every push is a MULTI/EXEC): %w", where, err))
	}
	probes := [][]any{{"SADD", p.cfg.key("queues"), "outbox-check"}}
	for _, q := range p.cfg.queues() {
		probes = append(probes, []any{"LPUSH", p.cfg.key("queue:" + q), "{}"})
	}
	probes = append(probes, []any{"ZADD", p.cfg.key("schedule"), "0", "{}"})
	var probeErr error
	for _, args := range probes {
		if err := conn.Do(ctx, args...).Err(); err != nil {
			probeErr = fmt.Errorf("sidekiq publisher: check %s: %s to %q (queued in MULTI, discarded): %w",
				where, strings.ToUpper(args[0].(string)), args[1], err)
			break
		}
	}
	// The connection is closed with the client: a failed DISCARD leaves
	// nothing behind.
	_ = conn.Do(ctx, "DISCARD").Err()
	return classify(probeErr)
}
