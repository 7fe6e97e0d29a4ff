package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/testenv"
)

// The CDC pair: PostgreSQL streamed from its write-ahead log by `outbox
// relay --mode cdc` processes (pgcdc), to NATS JetStream. Two relays share
// the slot: one streams, the other waits as a hot standby.

// cdcRelays is how many CDC relay processes share the slot.
const cdcRelays = 2

// envCDCArgs holds more arguments for the CDC relay processes, separated
// by spaces.
const envCDCArgs = "OUTBOX_FAULTS_CDC_ARGS"

// TestFaultsCDC runs the CDC pair through SIGKILLs of the streaming relay
// (at random, and right after the broker acknowledged events it has not
// confirmed), broker outages, a stalled, dropped and cut path to the
// broker, terminated database sessions and a database restart: nothing
// lost, nothing phantom, per-key order kept, every effect applied once.
func TestFaultsCDC(t *testing.T) {
	t.Run("postgres-cdc+nats", func(t *testing.T) { runCDCFaults(t, newLogicalPostgres(t), newNATS(t)) })
}

// newLogicalPostgres is the suite's private PostgreSQL cluster with
// wal_level=logical (set, then restarted into); without a private cluster
// the test ends (the shared server must not be reconfigured).
func newLogicalPostgres(t *testing.T) *pgDatabase {
	t.Helper()
	d := newPostgres(t)
	if d.cluster == nil {
		testenv.Unreachable(t, "a private PostgreSQL cluster (initdb, pg_ctl) for wal_level=logical",
			errors.New("the shared server is not reconfigured for logical replication"))
	}
	ctx := context.Background()
	if _, err := d.pool.Exec(ctx, `ALTER SYSTEM SET wal_level = logical`); err != nil {
		t.Fatal(err)
	}
	if err := d.cluster.restart(); err != nil {
		t.Fatal(err)
	}
	d.pool.Reset()
	var level string
	waitFor(t, "the restarted cluster", 60*time.Second, func() bool {
		return d.pool.QueryRow(ctx, `SHOW wal_level`).Scan(&level) == nil
	})
	if level != "logical" {
		t.Fatalf("wal_level is %s after the restart, want logical", level)
	}
	return d
}

// cdcRelayProcess is `outbox relay --mode cdc` in a process of its own —
// the CLI's own code, run from the test binary — until it is killed.
func cdcRelayProcess() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := []string{"relay", "--mode", "cdc", "--database-url", os.Getenv(envDB), "--schema", os.Getenv(envSchema),
		"--broker-url", os.Getenv(envBroker), "--stream", os.Getenv("OUTBOX_FAULTS_NATS_STREAM"), "--subject-prefix", os.Getenv(envPrefix),
		// Only a permanent rejection makes an event dead; a keyed one then
		// lets its key go on (as the polling relays of the suite).
		"--keyed-failure", "dead-letter", "--max-attempts", "1000", "--publish-timeout", publishTimeout.String(),
		"--log-level", "warn"}
	args = append(args, strings.Fields(os.Getenv(envCDCArgs))...)
	if code := outboxcli.Main(ctx, args, os.Stdout, os.Stderr); code != 0 {
		return fmt.Errorf("outbox relay --mode cdc exited with status %d", code)
	}
	return nil
}

// cdcProc is a slot for one relay process, under a supervisor that
// starts it again when it exits on its own (as systemd's Restart=always
// or a Kubernetes pod would): `outbox relay` exits when it cannot reach
// the database at start, during a restart say.
type cdcProc struct {
	env []string
	log io.Writer

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when cmd has exited
	closed   bool
	restarts atomic.Int64 // exits the supervisor started again
}

// cdcRestartDelay is the supervisor's pause before starting an exited
// relay again (systemd's RestartSec).
const cdcRestartDelay = 200 * time.Millisecond

// start starts the slot's process; one the slot still holds is killed
// first, so that a kill and a start racing from two goroutines (the
// killer's and the test's) cannot leave a process behind.
func (p *cdcProc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("start a CDC relay: its slot is closed")
	}
	if p.cmd != nil {
		_ = p.cmd.Process.Kill()
		<-p.done // closed before its supervisor takes the lock
	}
	return p.startLocked()
}

func (p *cdcProc) startLocked() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(p.env, []string{envHelper + "=cdc"})
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := helpers.start(cmd, "cdc"); err != nil {
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		helpers.wait(cmd)
		close(done)
		time.Sleep(cdcRestartDelay)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.cmd == cmd && !p.closed { // it exited on its own, not killed
			p.restarts.Add(1)
			if err := p.startLocked(); err != nil {
				fmt.Fprintln(p.log, "supervisor: restart the CDC relay:", err)
			}
		}
	}()
	return nil
}

// kill SIGKILLs the process and waits for it; the slot stays empty until
// start.
func (p *cdcProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-done
	}
}

// close kills the process for good.
func (p *cdcProc) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.kill()
}

// cdcWorld is a CDC run's relays and what it measures of them.
type cdcWorld struct {
	t      *testing.T
	db     *pgDatabase
	br     *natsBroker
	relays []*cdcProc

	mu        sync.Mutex
	takeovers []time.Duration
}

// startCDCRelays starts n relay processes, each with an
// application_name of its own (<db.appName>-cdc-<i>), and waits until
// one streams from the slot.
func startCDCRelays(t *testing.T, db *pgDatabase, br *natsBroker, env []string, log *os.File, n int) *cdcWorld {
	t.Helper()
	w := &cdcWorld{t: t, db: db, br: br}
	for i := range n {
		url := db.url + "&application_name=" + w.appName(i)
		p := &cdcProc{env: slices.Concat(env, []string{envDB + "=" + url}), log: log}
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
		w.relays = append(w.relays, p)
	}
	t.Cleanup(func() {
		for _, p := range w.relays {
			p.close()
		}
	})
	waitFor(t, "a CDC relay to stream from the slot", 60*time.Second, func() bool { return w.active() >= 0 })
	return w
}

func (w *cdcWorld) appName(i int) string { return fmt.Sprintf("%s-cdc-%d", w.db.appName, i) }

// active is the index of the relay streaming from the slot, -1 for none.
func (w *cdcWorld) active() int {
	var app string
	err := w.db.pool.QueryRow(context.Background(), `SELECT coalesce(a.application_name, '') FROM pg_replication_slots s
		JOIN pg_stat_activity a ON a.pid = s.active_pid WHERE s.slot_name = 'outbox_cdc'`).Scan(&app)
	if err != nil {
		return -1
	}
	for i := range w.relays {
		if app == w.appName(i) {
			return i
		}
	}
	return -1
}

// stored is how many messages JetStream has stored (acknowledged).
func (w *cdcWorld) stored(ctx context.Context) (uint64, error) {
	st, err := w.br.js.Stream(ctx, w.br.stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// killActiveAfterAck waits until JetStream has acknowledged (stored) more
// than held messages and SIGKILLs the relay that streams then — between
// the broker's ack and the slot's confirmation, which follows the mark
// and comes at most once a second. It returns that relay and when it
// died.
func (w *cdcWorld) killActiveAfterAck(ctx context.Context, held uint64) (killed int, died time.Time, err error) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			return -1, time.Time{}, errors.New("no new event acknowledged, or no relay streaming, within 60s")
		}
		if n, err := w.stored(ctx); err == nil && n > held {
			if killed = w.active(); killed >= 0 {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // polling JetStream for the ack
	}
	w.relays[killed].kill()
	return killed, time.Now(), nil
}

// waitTakeover waits until a relay streams from the slot again and
// records how long after died that was.
func (w *cdcWorld) waitTakeover(died time.Time) (time.Duration, error) {
	for w.active() < 0 {
		if time.Since(died) > 2*time.Minute {
			return 0, errors.New("no relay took the slot over within 2 minutes")
		}
		time.Sleep(5 * time.Millisecond) // polling pg_replication_slots
	}
	took := time.Since(died)
	w.mu.Lock()
	w.takeovers = append(w.takeovers, took)
	w.mu.Unlock()
	return took, nil
}

// restarts is how many times the relays exited on their own (a database
// unreachable at start) and were started again.
func (w *cdcWorld) restarts() int64 {
	var n int64
	for _, p := range w.relays {
		n += p.restarts.Load()
	}
	return n
}

// takeoverSummary is "n, median m, max x" of the takeovers measured.
func (w *cdcWorld) takeoverSummary() string {
	w.mu.Lock()
	d := slices.Clone(w.takeovers)
	w.mu.Unlock()
	if len(d) == 0 {
		return "none measured"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	r := func(x time.Duration) time.Duration { return x.Round(time.Millisecond) }
	return fmt.Sprintf("%d, median %v, max %v", len(d), r(d[len(d)/2]), r(d[len(d)-1]))
}

// killConns terminates every session of the relays (their SQL pools and
// their walsenders) and of the inbox's consumer.
func (w *cdcWorld) killConns(ctx context.Context) (n int, err error) {
	err = w.db.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 OR starts_with(application_name, $1 || '-cdc-')`, w.db.appName).Scan(&n)
	return n, err
}

// runCDCFaults is the suite's run for the CDC pair (see TestFaultsCDC).
// The polling relays' claim faults (held claims, a SIGSTOP past the claim
// timeout) do not apply: the CDC relay claims nothing.
func runCDCFaults(t *testing.T, db *pgDatabase, br *natsBroker) {
	s := startSuite(t, db, br)
	pl, inboxProc := s.pl, s.inboxProc
	ctx := context.Background()
	// The slot exists before the first event: a new slot starts at its
	// creation.
	cw := startCDCRelays(t, db, br, s.env, s.log, cdcRelays)
	w := startWriters(t, db, s.keys, pl.pace)

	// Random SIGKILLs of either relay, streaming or standing by.
	var c counts
	var ackKills atomic.Int64
	stopKiller := s.startKiller(t, func(int) killable {
		c.kills.Add(1)
		return cw.relays[rand.IntN(len(cw.relays))]
	})

	begin := time.Now()
	waitFor(t, "the first events to commit", 30*time.Second, func() bool { return w.committed.Load() > 100 })
	var bad badInput
	for round := range pl.rounds {
		t.Logf("%s: round %d of %d at %v", pl.name, round+1, pl.rounds, time.Since(begin).Round(time.Millisecond))
		for range 2 {
			held, err := cw.stored(ctx)
			if err != nil {
				t.Errorf("read the stream: %v", err)
				continue
			}
			killed, died, err := cw.killActiveAfterAck(ctx, held)
			if err != nil {
				t.Errorf("kill the streaming relay after an ack: %v", err)
				continue
			}
			if err := cw.relays[killed].start(); err != nil {
				t.Fatalf("restart a CDC relay: %v", err)
			}
			took, err := cw.waitTakeover(died)
			if err != nil {
				t.Errorf("standby takeover: %v", err)
				continue
			}
			c.kills.Add(1)
			ackKills.Add(1)
			t.Logf("SIGKILLed the streaming relay %d after an ack; the slot streamed again %v later", killed, took.Round(time.Millisecond))
			pause(300 * time.Millisecond)
		}
		if round == 0 {
			bad = enqueueBadInput(t, db, br.badInput(), w.write)
		}
		n, err := cw.killConns(ctx)
		if err != nil {
			t.Errorf("terminate the relays' and the inbox's sessions: %v", err)
		}
		c.connKills.Add(1)
		c.sessionsKilled.Add(int64(n))
		pause(500 * time.Millisecond)

		brokerAndPathFaults(t, br, pl, &c)

		if err := db.restart(); err != nil {
			t.Errorf("restart the database: %v", err)
		} else {
			c.dbRestarts.Add(1)
			pause(500 * time.Millisecond)
		}
	}
	lastFault := time.Now()
	stopKiller()
	w.stop()

	o := s.check(t, db, br, w, bad, lastFault)

	tbl := newTable()
	tbl.row("mode", pl.name)
	tbl.row("relay processes", fmt.Sprintf("%d on one slot (outbox relay --mode cdc: one streams, the others stand by)", cdcRelays))
	tbl.row("run (faults)", lastFault.Sub(begin).Round(100*time.Millisecond))
	tbl.row("events committed", len(o.committed))
	tbl.row("transactions rolled back on purpose", len(o.rolledBack))
	tbl.row("transactions failed by faults", w.errors.Load())
	tbl.row("relay kills (SIGKILL)", fmt.Sprintf("%d (%d of the streaming relay right after a broker ack)", c.kills.Load(), ackKills.Load()))
	tbl.row("standby takeovers after an ack kill", cw.takeoverSummary())
	tbl.row("relay exits restarted by the supervisor", cw.restarts())
	tbl.row("broker outages", c.outages.Load())
	tbl.row("proxy stalls / drops / cuts", fmt.Sprintf("%d / %d / %d", c.proxyStalls.Load(), c.drops.Load(), c.cuts.Load()))
	tbl.row("connection kills", fmt.Sprintf("%d (%d relay, walsender and inbox sessions terminated)", c.connKills.Load(), c.sessionsKilled.Load()))
	tbl.row("database restarts", fmt.Sprintf("%d (%d whose fast shutdown did not finish in %v and was made immediate)",
		c.dbRestarts.Load(), db.cluster.hardStops.Load(), fastStopWait))
	o.rows(tbl, br, inboxProc)
	t.Logf("fault-injection summary (%s CDC + %s):\n%s", db.name(), br.name(), tbl)

	o.verdict(t)
	if ackKills.Load() == 0 || c.outages.Load() == 0 || c.dbRestarts.Load() == 0 {
		t.Errorf("no kill after an ack, no outage or no database restart: the run proved nothing")
	}
}
