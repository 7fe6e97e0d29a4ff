package pgcdc_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
)

// refusingPublisher fails every event with err while down is set, and
// records what it acknowledges otherwise.
type refusingPublisher struct {
	err   error
	down  atomic.Bool
	tries atomic.Int64 // failed tries
	mu    sync.Mutex
	acked []uuid.UUID
}

func (p *refusingPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range msgs {
		if p.down.Load() {
			errs[i] = p.err
			p.tries.Add(1)
			continue
		}
		p.acked = append(p.acked, m.ID)
	}
	return errs
}

func (p *refusingPublisher) Close() error { return nil }

func (p *refusingPublisher) ackedIDs() []uuid.UUID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]uuid.UUID(nil), p.acked...)
}

// A fast shutdown of PostgreSQL waits for each walsender's client to
// confirm everything it was sent. A relay whose broker is down, or whose
// event blocks its key, can confirm nothing; if it held on to its stream,
// the server would stay in shutdown (refusing every connection: the
// application down too) until the broker came back or the event went
// through. The relay lets go of the stream instead; once the server is
// back it streams again from the slot, and the event held meanwhile is
// published once the broker takes it — nothing lost.
//
// It also holds the fix for a relay that reconnected while its broker was
// down: its window was empty, so the breaker had no event to probe the
// broker with, and the stream waited for the breaker to close — forever.
func TestFastShutdownWhileStuck(t *testing.T) {
	t.Run("broker down", func(t *testing.T) {
		testFastShutdownWhileStuck(t, publishers.Unavailable(errors.New("connection refused")))
	})
	t.Run("key blocked", func(t *testing.T) {
		testFastShutdownWhileStuck(t, errors.New("the broker rejects this event"))
	})
}

func testFastShutdownWhileStuck(t *testing.T, fail error) {
	c, stop, err := startCluster()
	if err != nil {
		testenv.Unreachable(t, "a private PostgreSQL cluster (initdb, pg_ctl) to shut down", err)
	}
	t.Cleanup(stop)
	w := &env{t: t, cluster: c, name: "shutdown"}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.url("shutdown_test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db, err := postgres.New(pool, &postgres.Config{Schema: "shutdown", DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pub := &refusingPublisher{err: fail}
	pub.down.Store(true)
	w.pool, w.db, w.table = pool, db, "shutdown.messages"
	w.start(w.config(), pub)
	m := msg("k")
	w.insert(false, m)
	w.waitFor("the relay stuck on the event", 30*time.Second, func() bool { return pub.tries.Load() >= 2 })

	// Without the relay letting go, this waits for the broker to take
	// the event, which it does not while it waits.
	if out, err := c.run("pg_ctl", "-D", c.data, "-w", "-t", "60", "-m", "fast", "stop"); err != nil {
		t.Fatalf("fast shutdown with the relay stuck: %v: %s", err, out)
	}
	if out, err := c.run("pg_ctl", "-D", c.data, "-l", c.dir+"/server.log", "-w", "-t", "60", "-o", c.opts, "start"); err != nil {
		t.Fatalf("start again: %v: %s", err, out)
	}
	pool.Reset() // its sessions ended with the server
	pub.down.Store(false)
	w.waitFor("the held event published after the restart", 60*time.Second, func() bool {
		for _, id := range pub.ackedIDs() {
			if id == m.ID {
				return true
			}
		}
		return false
	})
	w.waitFor("the event's row done", 30*time.Second, func() bool { return w.count(0) == 0 })
}
