package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// writers are the suite's writers: 8 at once on random keys, a tenth of
// their transactions rolling back on purpose. A transaction that fails
// for a fault is not retried: the log table, not the writer, says what
// committed.
type writers struct {
	db   database
	keys []string

	committed, errors atomic.Int64
	mu                sync.Mutex
	rolledBack        []uuid.UUID

	stop func() // stops them and waits; idempotent
}

// startWriters starts the writers, one transaction each per pace; they
// stop at cleanup, or at w.stop.
func startWriters(t *testing.T, db database, keys []string, pace time.Duration) *writers {
	w := &writers{db: db, keys: keys}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			tick := time.NewTicker(pace)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				rollback := rand.IntN(10) == 0
				id, err := w.write(keys[rand.IntN(len(keys))], rollback)
				switch {
				case rollback && errors.Is(err, errRollbackOnPurpose):
					w.mu.Lock()
					w.rolledBack = append(w.rolledBack, id)
					w.mu.Unlock()
				case err != nil:
					w.errors.Add(1) // a fault; the log table decides
				default:
					w.committed.Add(1)
				}
			}
		})
	}
	w.stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(w.stop)
	return w
}

// write commits (or, with rollback, rolls back) one event of key with
// its business change, within 10 s.
func (w *writers) write(key string, rollback bool) (uuid.UUID, error) {
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: key, Type: "Counted",
		Payload: []byte(`{"key":"` + key + `"}`), Headers: map[string]string{"traceparent": "00-faults"}}
	return m.ID, w.db.write(wctx, m, rollback)
}

// rolledBackIDs are the events of the transactions rolled back on purpose.
func (w *writers) rolledBackIDs() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]uuid.UUID(nil), w.rolledBack...)
}

// arrivals is what a plain consumer of the broker found, checked against
// what committed.
type arrivals struct {
	lost, phantom, violations, dups int
}

// checkArrivals reads everything the broker holds and checks it against
// log: every committed event arrived (lost), nothing else did (phantom,
// and no rolled-back event), and each key's events arrived in commit
// order (violations); re-deliveries are counted (dups).
func checkArrivals(t *testing.T, br broker, log map[uuid.UUID]commit, rolledBack []uuid.UUID) arrivals {
	t.Helper()
	cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	got, err := br.consume(cctx, len(log))
	cancel()
	if err != nil {
		t.Fatalf("read the broker: %v", err)
	}
	var a arrivals
	seen := map[uuid.UUID]bool{}
	last := map[string]int{}
	for _, id := range got {
		if seen[id] {
			a.dups++
			continue
		}
		seen[id] = true
		cm, ok := log[id]
		if !ok {
			a.phantom++
			t.Errorf("event %s arrived but never committed", id)
			continue
		}
		if cm.rank <= last[cm.key] {
			a.violations++
			t.Errorf("key %s: event of commit rank %d arrived after rank %d", cm.key, cm.rank, last[cm.key])
		}
		last[cm.key] = cm.rank
	}
	for id := range log {
		if !seen[id] {
			a.lost++
		}
	}
	for _, id := range rolledBack {
		if seen[id] {
			t.Errorf("rolled-back event %s arrived", id)
		}
	}
	return a
}

// helperLog is the file the helper processes write their logs to; its
// tail goes to the test's log when the test fails.
func helperLog(t *testing.T) *os.File {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), "helpers.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(logFile.Name()); err == nil {
				if len(b) > 8<<10 {
					b = b[len(b)-8<<10:]
				}
				t.Logf("helpers' log (tail):\n%s", b)
			}
		}
		_ = logFile.Close()
	})
	return logFile
}

// waitDrained waits until no pending event is left, and returns the
// backlog it started from. How long that takes depends on the backlog the
// faults left (a slow broker on a loaded machine may leave tens of
// thousands of events), so the deadline is on progress: the test fails
// when the backlog has not shrunk for a minute, or after 10.
func waitDrained(t *testing.T, db database) int {
	t.Helper()
	ctx := context.Background()
	backlog, err := db.pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	low, lowAt, lastReport := backlog, time.Now(), time.Now()
	waitFor(t, "the relays to drain the outbox after the last fault", 10*time.Minute, func() bool {
		n, err := db.pending(ctx)
		if err != nil {
			return false
		}
		if n < low {
			low, lowAt = n, time.Now()
		}
		if time.Since(lowAt) > time.Minute {
			t.Fatalf("the relays made no progress for a minute: %d events pending", n)
		}
		if time.Since(lastReport) >= 10*time.Second {
			t.Logf("draining: %d events pending", n)
			lastReport = time.Now()
		}
		return n == 0
	})
	return backlog
}

// pause waits d: the fault script's rhythm, not a wait for a condition.
func pause(d time.Duration) { time.Sleep(d) }

// brokerAndPathFaults is a round's broker faults: the broker stopped for
// one of the plan's outages and started again, then the relays' path to
// it stalled, its connections dropped, and the path cut for a while; each
// is counted in c.
func brokerAndPathFaults(t *testing.T, br broker, pl plan, c *counts) {
	t.Helper()
	out := pl.outage()
	if err := br.stop(); err != nil {
		t.Fatalf("stop the broker: %v", err)
	}
	c.outages.Add(1)
	pause(out)
	if err := br.start(); err != nil {
		t.Fatalf("start the broker again: %v", err)
	}
	t.Logf("broker was down for %v", out)
	pause(500 * time.Millisecond)

	px := br.proxy()
	px.Stall(true)
	c.proxyStalls.Add(1)
	pause(pl.stall)
	px.Stall(false)
	pause(500 * time.Millisecond)

	px.Drop()
	c.drops.Add(1)
	pause(500 * time.Millisecond)

	px.Cut()
	c.cuts.Add(1)
	pause(pl.cut)
	px.Restore(t)
	pause(500 * time.Millisecond)
}

// inboxSparer is a broker whose inbox consumer the suite must not SIGKILL
// mid-run; sparesInbox says why, for the log.
type inboxSparer interface{ sparesInbox() string }

// sparedInbox is why br's inbox consumer is spared the kills, or "" when it
// is not.
func sparedInbox(br broker) string {
	if s, ok := br.(inboxSparer); ok {
		return s.sparesInbox()
	}
	return ""
}
