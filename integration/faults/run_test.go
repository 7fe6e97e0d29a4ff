package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// plan is the scale of a run: OUTBOX_FAULTS=long for the long run,
// the short one otherwise (CI's).
type plan struct {
	name      string
	relays    int
	keys      int
	rounds    int           // times the fault script runs
	pace      time.Duration // between two transactions of one writer
	outage    func() time.Duration
	stall     time.Duration // proxy stalled
	cut       time.Duration // proxy refusing connections
	killEvery [2]time.Duration
}

func planFor() plan {
	if os.Getenv("OUTBOX_FAULTS") == "long" {
		return plan{name: "long", relays: 4, keys: 200, rounds: 4, pace: 20 * time.Millisecond,
			outage: func() time.Duration { return 10*time.Second + rand.N(20*time.Second) },
			stall:  5 * time.Second, cut: 5 * time.Second, killEvery: [2]time.Duration{time.Second, 3 * time.Second}}
	}
	return plan{name: "short", relays: 3, keys: 40, rounds: 1, pace: 30 * time.Millisecond,
		outage: func() time.Duration { return 2500 * time.Millisecond },
		stall:  2 * time.Second, cut: 2 * time.Second, killEvery: [2]time.Duration{600 * time.Millisecond, 1500 * time.Millisecond}}
}

// counts are the faults injected.
type counts struct {
	kills, heldKills, inboxKills, stops, proxyStalls, drops, cuts, outages, connKills, sessionsKilled, dbRestarts atomic.Int64
}

// runFaults is the suite, for one database and one broker: writers enqueue
// on keys (a tenth of them rolling back) while relay processes are
// SIGKILLed (at random, and held between claim and publish and between
// publish and mark), one is SIGSTOPped past its claim timeout, the inbox's
// consumer is SIGKILLed, the broker is stopped and restarted, its path
// stalled, dropped and cut, the relays' database sessions are terminated
// and the database restarted; bad input is mixed in. Then a plain client
// of the broker and the inbox's effects prove that nothing committed was
// lost, nothing rolled back arrived, each key kept its commit order, and
// every effect was applied exactly once.
func runFaults(t *testing.T, db database, br broker) {
	s := startSuite(t, db, br)
	pl, env, logFile, inboxProc := s.pl, s.env, s.log, s.inboxProc
	ctx := context.Background()

	// The relays, after the inbox's consumer.
	procs := make([]*proc, pl.relays)
	for i := range procs {
		procs[i] = &proc{env: env, mode: "run", log: logFile}
		if err := procs[i].start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range append(procs, inboxProc) {
			p.signal(syscall.SIGCONT)
			p.kill()
		}
	})

	// Writers: 8 at once on random keys, a tenth rolling back on purpose.
	w := startWriters(t, db, s.keys, pl.pace)
	write, stopWriters := w.write, w.stop

	// Random kills of every relay but the first (the one SIGSTOPped), and
	// every fourth time of the inbox's consumer.
	var c counts
	spared := sparedInbox(br)
	if spared != "" {
		t.Logf("the inbox's consumer is not SIGKILLed with %s: %s", br.name(), spared)
	}
	stopKiller := s.startKiller(t, func(i int) killable {
		if i%4 == 0 && spared == "" {
			c.inboxKills.Add(1)
			return inboxProc
		}
		c.kills.Add(1)
		return procs[1+rand.IntN(len(procs)-1)]
	})

	begin := time.Now()
	// Let a backlog build and the relays get going.
	waitFor(t, "the first events to commit", 30*time.Second, func() bool { return w.committed.Load() > 100 })

	var bad badInput
	for round := range pl.rounds {
		t.Logf("%s: round %d of %d at %v", pl.name, round+1, pl.rounds, time.Since(begin).Round(time.Millisecond))
		for _, mode := range []string{"hold-claim", "hold-publish"} {
			n, err := holdAndKill(env, logFile, mode)
			if err != nil {
				t.Errorf("kill %s: %v", mode, err)
			} else {
				c.kills.Add(1)
				c.heldKills.Add(1)
				t.Logf("SIGKILLed a relay holding %d events (%s)", n, mode)
			}
			pause(300 * time.Millisecond)
		}
		if round == 0 {
			bad = enqueueBadInput(t, db, br.badInput(), write)
		}

		procs[0].signal(syscall.SIGSTOP)
		c.stops.Add(1)
		pause(claimTimeout + time.Second)
		procs[0].signal(syscall.SIGCONT)
		pause(300 * time.Millisecond)

		n, err := db.killConns(ctx)
		if err != nil {
			t.Errorf("terminate the relays' and the inbox's sessions: %v", err)
		}
		c.connKills.Add(1)
		c.sessionsKilled.Add(int64(n))
		pause(500 * time.Millisecond)

		brokerAndPathFaults(t, br, pl, &c)

		switch err := db.restart(); {
		case errors.Is(err, errNoRestart):
		case err != nil:
			t.Errorf("restart the database: %v", err)
		default:
			c.dbRestarts.Add(1)
			pause(500 * time.Millisecond)
		}
		n, err = db.killConns(ctx)
		if err != nil {
			t.Errorf("terminate the relays' and the inbox's sessions: %v", err)
		}
		c.connKills.Add(1)
		c.sessionsKilled.Add(int64(n))
	}
	lastFault := time.Now()
	stopKiller()
	stopWriters()

	o := s.check(t, db, br, w, bad, lastFault)

	tbl := newTable()
	tbl.row("mode", pl.name)
	tbl.row("relay processes", pl.relays)
	tbl.row("run (faults)", lastFault.Sub(begin).Round(100*time.Millisecond))
	tbl.row("events committed", len(o.committed))
	tbl.row("transactions rolled back on purpose", len(o.rolledBack))
	tbl.row("transactions failed by faults", w.errors.Load())
	tbl.row("relay kills (SIGKILL)", fmt.Sprintf("%d (%d held between claim/publish or publish/mark)", c.kills.Load(), c.heldKills.Load()))
	tbl.row("inbox consumer kills (SIGKILL)", c.inboxKills.Load())
	tbl.row("stalls", fmt.Sprintf("%d (%d SIGSTOP past the claim timeout, %d proxy stalls)", c.stops.Load()+c.proxyStalls.Load(), c.stops.Load(), c.proxyStalls.Load()))
	tbl.row("broker outages", c.outages.Load())
	tbl.row("proxy drops / cuts", fmt.Sprintf("%d / %d", c.drops.Load(), c.cuts.Load()))
	tbl.row("connection kills", fmt.Sprintf("%d (%d relay and inbox sessions terminated)", c.connKills.Load(), c.sessionsKilled.Load()))
	tbl.row("database restarts", c.dbRestarts.Load())
	o.rows(tbl, br, inboxProc)
	t.Logf("fault-injection summary (%s + %s):\n%s", db.name(), br.name(), tbl)

	o.verdict(t)
	if c.kills.Load() == 0 || c.outages.Load() == 0 {
		t.Errorf("no relay killed or no outage: the run proved nothing")
	}
}

// checkDead checks that the dead events are exactly the bad input, each
// with a clear error, and returns how many were.
func checkDead(t *testing.T, db database, bad badInput) int {
	t.Helper()
	dead, err := db.dead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, b := range bad.dead {
		switch le, found := dead[b.id]; {
		case !found:
			t.Errorf("bad input %q was not dead-lettered", b.what)
		case !strings.Contains(le, b.want):
			t.Errorf("bad input %q dead with last_error %q, want it to mention %q", b.what, le, b.want)
		default:
			ok++
			t.Logf("dead-lettered %s: %s", b.what, le)
		}
		delete(dead, b.id)
	}
	for id, le := range dead {
		t.Errorf("event %s dead, and it was no bad input: %s", id, le)
	}
	return ok
}

// checkInbox waits until the inbox's consumer has applied an effect for
// every committed event and the broker has nothing left for it — asked
// with the consumer stopped, so nothing is in flight — and checks that
// each committed event had exactly one effect and nothing else had any.
func checkInbox(t *testing.T, db database, br broker, inboxProc *proc, log map[uuid.UUID]commit) (applied, wrong int) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, "the inbox to apply every committed event", 90*time.Second, func() bool {
		eff, err := db.effects(ctx)
		return err == nil && len(eff) >= len(log)
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		inboxProc.kill()
		n, err := br.inboxBacklog(ctx)
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the inbox's consumer still has a backlog of %d (%v) after 60s", n, err)
		}
		if err := inboxProc.start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the inbox's consumer to work off its backlog", 30*time.Second, func() bool {
			n, err := br.inboxBacklog(ctx)
			return err == nil && n == 0
		})
	}
	eff, err := db.effects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, n := range eff {
		applied += n
		if _, ok := log[id]; !ok || n != 1 {
			wrong++
			t.Errorf("event %s: %d effects (committed: %v), want exactly one per committed event", id, n, ok)
		}
	}
	for id := range log {
		if eff[id] == 0 {
			wrong++
			t.Errorf("committed event %s: no effect", id)
		}
	}
	return applied, wrong
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// table is a two-column summary table.
type table struct{ rows [][2]string }

func newTable() *table { return &table{} }

func (t *table) row(name string, v any) { t.rows = append(t.rows, [2]string{name, fmt.Sprint(v)}) }

// String renders the table in Markdown.
func (t *table) String() string {
	w0, w1 := len("fault / check"), len("value")
	for _, r := range t.rows {
		w0, w1 = max(w0, len(r[0])), max(w1, len(r[1]))
	}
	var sb strings.Builder
	line := func(a, b string) { fmt.Fprintf(&sb, "| %-*s | %-*s |\n", w0, a, w1, b) }
	line("fault / check", "value")
	line(strings.Repeat("-", w0), strings.Repeat("-", w1))
	for _, r := range t.rows {
		line(r[0], r[1])
	}
	return sb.String()
}
