package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// checkTopic names the stream key of Check's XADD probe (prefix + it),
// which is queued in a transaction and discarded, never appended.
const checkTopic = "outbox-check"

// Check verifies that Redis accepts the configuration: on a connection of
// its own (a client made from PublisherConfig.URL for this call, closed
// after it), the handshake — AUTH or HELLO with the URL's credentials,
// SELECT of its database — and a PING; then that the user may run XADD:
// MULTI, an XADD of a probe entry, DISCARD. Redis checks a queued command's permissions
// when it queues it, and DISCARD drops it, so nothing is ever appended.
//
// It returns an error classified publishers.Misconfigured when Redis
// refuses the credentials (WRONGPASS, NOAUTH, ERR AUTH …), the database
// (ERR DB index is out of range) or XADD (NOPERM for the command),
// publishers.Unavailable when it cannot be reached. Key permissions depend
// on the topics, which Check does not know: a NOPERM for the probe's key
// passes here and fails the messages of a forbidden stream at Publish,
// as Misconfigured. A user without MULTI skips the XADD probe (logged at
// level Info).
//
// With PublisherConfig.Client set, Check sends a PING through that
// client, which proves the credentials only when the PING opens a new
// connection.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("redis publisher: check: %w", ErrClosed))
	}
	if !p.ownClient {
		if err := p.rdb.Ping(ctx).Err(); err != nil {
			return classify(fmt.Errorf("redis publisher: check: PING: %w", err))
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
		return classify(fmt.Errorf("redis publisher: check %s: %w", where, err))
	}
	if err := conn.Do(ctx, "MULTI").Err(); err != nil {
		if isNoPerm(err) { // no transactions for this user: nothing to probe with
			p.log.Info("redis publisher: check: the user may not run MULTI, so XADD's permission is not probed; the first publish proves it", "url", where)
			return nil
		}
		return classify(fmt.Errorf("redis publisher: check %s: MULTI: %w", where, err))
	}
	key := p.stream(checkTopic)
	xerr := conn.Do(ctx, "XADD", key, "*", FieldID, "check").Err()
	// The connection is closed with the client: a failed DISCARD leaves
	// nothing behind.
	_ = conn.Do(ctx, "DISCARD").Err()
	switch {
	case xerr == nil:
		return nil
	case isNoPerm(xerr) && !strings.Contains(xerr.Error(), "command"):
		return nil // the probe's key, not the topics' streams
	}
	return classify(fmt.Errorf("redis publisher: check %s: XADD to %q (queued in MULTI, discarded): %w", where, key, xerr))
}

// isNoPerm reports whether err is Redis's NOPERM (ACL) refusal.
func isNoPerm(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM")
}
