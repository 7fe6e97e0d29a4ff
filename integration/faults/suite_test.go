package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// suite is what every run of the suite starts with, whatever its relays:
// the plan, the keys prepared in the database, the helper processes'
// environment and log, and the inbox's consumer, running.
type suite struct {
	pl        plan
	keys      []string
	env       []string
	log       *os.File
	inboxProc *proc
}

// startSuite prepares db for the plan's keys (and the bad key) and starts
// the inbox's consumer, killed at cleanup.
func startSuite(t *testing.T, db database, br broker) *suite {
	t.Helper()
	s := &suite{pl: planFor()}
	s.keys = make([]string, s.pl.keys)
	for i := range s.keys {
		s.keys[i] = fmt.Sprintf("key-%d", i)
	}
	if err := db.prepare(context.Background(), append(slices.Clone(s.keys), badKey)); err != nil {
		t.Fatal(err)
	}
	s.log = helperLog(t)
	s.env = slices.Concat(os.Environ(), db.env(), br.env())
	s.inboxProc = &proc{env: s.env, mode: "inbox", log: s.log}
	if err := s.inboxProc.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.inboxProc.kill)
	return s
}

// killable is a helper process the killer may SIGKILL and start again: a
// polling relay or the inbox's consumer (proc), a CDC relay (cdcProc).
type killable interface {
	kill()
	start() error
}

// startKiller SIGKILLs and restarts a process every killEvery of the plan,
// the one pick chooses for the i-th kill (from 1); pick counts the kill.
// The returned stop ends the killing, and is also called at cleanup.
func (s *suite) startKiller(t *testing.T, pick func(i int) killable) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ; i++ {
			d := s.pl.killEvery[0] + rand.N(s.pl.killEvery[1]-s.pl.killEvery[0])
			select {
			case <-done:
				return
			case <-time.After(d):
			}
			p := pick(i)
			p.kill()
			if err := p.start(); err != nil {
				t.Errorf("restart a killed %T: %v", p, err)
				return
			}
		}
	})
	stop = sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// outcome is what a run's checks found once the faults ended.
type outcome struct {
	committed  map[uuid.UUID]commit
	rolledBack []uuid.UUID
	deadOK     int
	bad        badInput
	arrivals
	applied, effectErrs int
	backlog             int           // pending at the last fault
	drain               time.Duration // from the last fault to no pending event
}

// check waits until nothing is pending, then checks what the run left: the
// dead events against the bad input, what the broker holds against what
// committed and rolled back, and the inbox's effects.
func (s *suite) check(t *testing.T, db database, br broker, w *writers, bad badInput, lastFault time.Time) outcome {
	t.Helper()
	o := outcome{bad: bad}
	o.backlog = waitDrained(t, db)
	o.drain = time.Since(lastFault)
	var err error
	if o.committed, err = db.committed(context.Background()); err != nil {
		t.Fatal(err)
	}
	o.deadOK = checkDead(t, db, bad)
	o.rolledBack = w.rolledBackIDs()
	o.arrivals = checkArrivals(t, br, o.committed, o.rolledBack)
	o.applied, o.effectErrs = checkInbox(t, db, br, s.inboxProc, o.committed)
	return o
}

// rows adds the outcome's rows to the run's summary, from the bad input on.
func (o outcome) rows(tbl *table, br broker, inboxProc *proc) {
	tbl.row("bad input dead-lettered", fmt.Sprintf("%d of %d (+%d refused at Enqueue)", o.deadOK, len(o.bad.dead), o.bad.refused))
	tbl.row("lost", o.lost)
	tbl.row("phantom", o.phantom)
	tbl.row("order violations", o.violations)
	tbl.row("duplicates delivered", o.dups)
	if n, ok := br.republished(); ok {
		tbl.row("re-publishes the broker dropped", fmt.Sprintf("%d (seen on the wire)", n))
	}
	tbl.row("inbox effects applied", fmt.Sprintf("%d (%d wrong)", o.applied, o.effectErrs))
	tbl.row("redeliveries the inbox dropped", inboxProc.dups.Load())
	tbl.row("backlog at the last fault", o.backlog)
	tbl.row("time to drain after the last fault", o.drain.Round(10*time.Millisecond))
}

// verdict fails the test for what every run must show: nothing lost, and
// enough committed to prove something.
func (o outcome) verdict(t *testing.T) {
	t.Helper()
	if o.lost > 0 {
		t.Errorf("%d committed events never arrived", o.lost)
	}
	if len(o.committed) < 100 {
		t.Errorf("only %d events committed", len(o.committed))
	}
}
