package postgres

import (
	"context"
	"strconv"
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
	return s.ListenQuiet(ctx, func(time.Duration) { wake() })
}

// ListenQuiet implements stores.QuietListener: Listen, each wake-up with
// what its NOTIFY's payload says (see Config.NotifyDebounce): how long its
// writer may now enqueue without notifying, in microseconds; -1 for an
// empty or foreign payload (the SQL function enqueue, Replay, older
// writers) and for a reconnect.
func (s *Store) ListenQuiet(ctx context.Context, wake func(quiet time.Duration)) error {
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
func (s *Store) listenOnce(ctx context.Context, wake func(time.Duration)) (listening bool, err error) {
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
	wake(-1)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		wake(quietOf(n.Payload))
	}
}

// quietOf reads a NOTIFY's payload as the writer's notice (see
// notifier.notice): microseconds, or -1 when it is not one.
func quietOf(payload string) time.Duration {
	us, err := strconv.ParseInt(payload, 10, 64)
	if err != nil || us < 0 || us > int64(time.Hour/time.Microsecond) {
		return -1
	}
	return time.Duration(us) * time.Microsecond
}

// WakeUps implements stores.Listener.
func (s *Store) WakeUps() string { return "LISTEN/NOTIFY on channel " + s.nm.channel }
