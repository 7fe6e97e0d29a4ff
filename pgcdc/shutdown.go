package pgcdc

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pglogrepl"
)

// errServerShutdown ends a streaming session whose server is shutting down
// while the relay holds events it cannot confirm.
var errServerShutdown = errors.New("PostgreSQL is shutting down while the relay cannot confirm what it was sent " +
	"(the broker is down, or a key is blocked)")

// shutdownWatch lets a server shut down while the relay is stuck.
//
// A fast (or smart) shutdown of PostgreSQL waits for every walsender's
// client to confirm all the WAL it was sent, up to the shutdown
// checkpoint; until then the server refuses every new connection. A relay
// whose broker is down, or whose oldest unconfirmed event is a blocked
// key's, confirms nothing; its status updates keep the walsender from
// timing out, so the server — and the application on it — would stay
// "shutting down" until the broker came back. So while the relay holds
// unconfirmed transactions and its confirmed position has not moved for a
// status interval, it asks the server whether it is shutting down (see
// serverShuttingDown); if it is, the stream lets go. The next session
// resumes from the slot's confirmed position: the events after it are
// sent again with their IDs, nothing is lost. A relay that does progress is never asked:
// it confirms everything and the walsender ends on its own.
func (r *Relay) shutdownWatch(ctx context.Context) {
	e := r.eng
	lastEpoch, lastAt := -1, pglogrepl.LSN(0)
	for r.sleep(ctx, r.cfg.StatusInterval) {
		if !r.active.Load() || r.shutdownSeen.Load() {
			lastEpoch = -1
			continue
		}
		e.mu.Lock()
		pending, epoch, at := len(e.txns) > 0, e.epoch, e.confirmable
		e.mu.Unlock()
		stuck := pending && epoch == lastEpoch && at == lastAt
		lastEpoch, lastAt = epoch, at
		if !stuck {
			continue
		}
		if r.serverShuttingDown(ctx) {
			r.shutdownSeen.Store(true)
			e.mu.Lock()
			e.notify()
			e.mu.Unlock()
		}
	}
}

// serverShuttingDown asks the server, on an ordinary connection, whether
// it is shutting down: it then refuses new sessions (57P03). A pooled
// session the server ended (57P01, 57P02) says only that it ended —
// pg_terminate_backend says the same — so the question goes again on
// another session, at most once per connection the pool may hold.
func (r *Relay) serverShuttingDown(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for range r.pool.Config().MaxConns + 1 {
		_, err := r.pool.Exec(cctx, `SELECT 1`)
		switch {
		case isCode(err, "57P03"): // cannot_connect_now
			return true
		case isCode(err, "57P01"), isCode(err, "57P02"): // admin_shutdown, crash_shutdown: this session ended
			continue
		}
		return false
	}
	return false
}
