package postgres

import (
	"context"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
)

// listenBackoff spaces the reconnects of a lost LISTEN connection.
var listenBackoff = outbox.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}

// Listen implements stores.Listener: it holds one pool connection in LISTEN
// on the table's channel and calls wake for each notification. After a lost
// connection it reconnects with backoff, and calls wake once on every
// (re)connect, since notifications sent meanwhile are gone. A lost
// connection is logged (Config.Logger); the relay polls meanwhile, so it
// costs latency only.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	failures := 0
	for ctx.Err() == nil {
		listening, err := s.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			break
		}
		if listening {
			failures = 0
		}
		failures++
		delay := listenBackoff.Delay(failures)
		s.cfg.Logger.Warn("postgres: LISTEN connection lost; relays poll until it is back",
			"channel", s.nm.channel, "retry_in", delay.Round(time.Millisecond), "err", redact.Text(err.Error()))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil //nolint:nilerr // Listen ends without an error when its context ends
}

// listenOnce listens until the connection fails; listening says whether it
// got as far as LISTEN.
func (s *Store) listenOnce(ctx context.Context, wake func()) (listening bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// The connection is in LISTEN state: never give it back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, `LISTEN "`+s.nm.channel+`"`); err != nil {
		return false, err
	}
	wake()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return true, err
		}
		wake()
	}
}

// WakeUps implements stores.Listener.
func (s *Store) WakeUps() string { return "LISTEN/NOTIFY on channel " + s.nm.channel }
