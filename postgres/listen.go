package postgres

import (
	"context"
	"time"
)

// Listen implements stores.Listener: it holds one pool connection in LISTEN
// on the table's channel and calls wake for each notification. After a lost
// connection it reconnects with backoff, and calls wake once on every
// (re)connect, since notifications sent meanwhile are gone.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			break
		}
		_ = err // the relay polls meanwhile; a lost listener costs latency only
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

func (s *Store) listenOnce(ctx context.Context, wake func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection is in LISTEN state: never give it back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, `LISTEN "`+s.nm.channel+`"`); err != nil {
		return err
	}
	wake()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}

// WakeUps implements stores.Listener.
func (s *Store) WakeUps() string { return "LISTEN/NOTIFY on channel " + s.nm.channel }
