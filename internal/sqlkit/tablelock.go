package sqlkit

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// TableLock is how long a migration waits for a table it changes, and how
// often it tries. A step that changes a table (an index built, a column
// altered, a table dropped) waits for every transaction using the table to
// end, and every writer that comes after waits behind the step: one long
// transaction (a report, a session left idle in a transaction) would stop
// the application's writes for as long as it lasts. So each try waits at
// most Timeout (the database's lock timeout), then gives up and lets the
// writers through, and the step is tried again after a pause; after Tries
// tries the migration fails.
type TableLock struct {
	Timeout time.Duration
	Tries   int
	Pause   func(try int) time.Duration // before try 2, 3, …
}

// DefaultTableLock waits 2 s a try, 8 tries, pausing 1, 2, 4, 8, 10, 10 and
// 10 s between them: about a minute in all.
var DefaultTableLock = TableLock{Timeout: 2 * time.Second, Tries: 8, Pause: func(try int) time.Duration {
	return min(time.Second<<(try-2), 10*time.Second)
}}

// Retry calls try until it succeeds, fails otherwise than by a lock wait
// that timed out (timedOut), or has been called l.Tries times; it logs each
// try given up, and the last error says how long the tries waited, and
// what to do.
func (l TableLock) Retry(ctx context.Context, log *slog.Logger, timedOut func(error) bool, try func() error) error {
	for n := 1; ; n++ {
		err := try()
		if err == nil || !timedOut(err) {
			return err
		}
		if n >= l.Tries {
			return fmt.Errorf("%w (%d tries of %s each: a transaction holds the table, and writers would wait behind the migration as long as it does; find it among the database's sessions, then run the migration again)",
				err, l.Tries, l.Timeout)
		}
		pause := l.Pause(n + 1)
		log.Warn("a table to migrate is in use by another transaction; trying again", "try", n, "of", l.Tries, "next_in", pause, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting to try again after: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}
