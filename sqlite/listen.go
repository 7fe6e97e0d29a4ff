package sqlite

import (
	"context"
	"time"
)

// Listen implements stores.Listener. SQLite has no NOTIFY, and a commit in
// another process leaves no trace but the file, so Listen polls: every
// ListenInterval it reads the table's insert counter (its row in
// sqlite_sequence, which AUTOINCREMENT keeps), and calls wake when the
// counter moved. In WAL mode that read never waits for the writer, and it
// costs the same whatever the backlog. It holds no connection between reads
// (so it is safe with db.SetMaxOpenConns(1)), calls wake once at the start,
// rides out errors (a missing table, a closed handle) by trying again, and
// returns when ctx is done.
//
// Replay does not move the counter: replayed events wait for the relay's
// next poll.
func (s *Store) Listen(ctx context.Context, wake func()) error {
	t := time.NewTicker(s.cfg.ListenInterval)
	defer t.Stop()
	last, known := int64(0), false
	read := func() {
		var n int64
		if err := s.db.QueryRowContext(ctx, s.q.inserted, s.cfg.Table).Scan(&n); err == nil {
			if known && n != last {
				wake()
			}
			last, known = n, true
		}
	}
	// The first read comes before the first wake-up, so that an event
	// committed after the caller's claim on that wake-up moves the counter
	// past a baseline already taken: it wakes the caller again.
	read()
	wake()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		read()
	}
}

// WakeUps implements stores.Listener.
func (s *Store) WakeUps() string {
	return "a read of the table's insert counter every " + s.cfg.ListenInterval.String()
}
