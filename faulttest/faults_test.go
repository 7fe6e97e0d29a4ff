package faulttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/natstest"
	"github.com/outboxgo/outbox/internal/pgtest"
	"github.com/outboxgo/outbox/stores/postgres"
	natssub "github.com/outboxgo/outbox/subscribers/nats"
)

// plan is the scale of a run: OUTBOX_FAULTS=long for the long run,
// the short one otherwise (CI's, well under a minute).
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

// Names of the suite's objects.
const (
	schema  = "faults"
	durable = "faults"
)

// env is one run's world: a database, a private broker behind a proxy, the
// relays' environment.
type env struct {
	pool     *pgxpool.Pool
	cluster  *pgCluster // nil: the shared PostgreSQL (no restart)
	schema   string
	appName  string // the relays' application_name
	relayEnv []string
	logFile  *os.File
}

// relayProc is one relay process slot; a kill starts a new process in it.
type relayProc struct {
	e   *env
	mu  sync.Mutex
	cmd *exec.Cmd
}

func (p *relayProc) start() error {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(p.e.relayEnv, []string{envHelper + "=run"}) // a copy: slots start concurrently
	cmd.Stderr = p.e.logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	return nil
}

func (p *relayProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *relayProc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
	}
}

// holdAndKill starts an extra relay in a hold mode, waits until it holds a
// batch (claimed and not published, or published and not marked) and
// SIGKILLs it there. It returns how many events the batch held.
func (e *env) holdAndKill(mode string) (int, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = slices.Concat(e.relayEnv, []string{envHelper + "=" + mode})
	cmd.Stderr = e.logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "held ") {
				line <- sc.Text()
				return
			}
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			return 0, fmt.Errorf("%s relay exited before holding a batch", mode)
		}
		if err := cmd.Process.Kill(); err != nil {
			return 0, err
		}
		return len(strings.Split(strings.TrimPrefix(l, "held "), ",")), nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("%s relay held no batch within 30s", mode)
	}
}

// killConns terminates the relays' database sessions and returns how many.
func (e *env) killConns(ctx context.Context) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		e.appName).Scan(&n)
	return n, err
}

// newEnv sets up the database: a private cluster when possible, else the
// shared PostgreSQL with a schema of the test's own.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{appName: fmt.Sprintf("outbox-faults-relay-%08x", rand.Uint32())}
	var dbURL string
	if c, err := startCluster(t); err == nil {
		e.cluster, e.schema = c, schema
		dbURL = c.url("")
	} else {
		t.Logf("no private PostgreSQL cluster (%v): using the shared one; the database restart is not done", err)
		dbURL = pgtest.URL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		pgtest.Pool(t) // skips (or fails in CI) with a message when the shared server is unreachable
		t.Fatalf("connect to %s: %v", dbURL, err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	if e.cluster == nil {
		e.schema = pgtest.Schema(t, pool)
	}
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	relayURL := dbURL + sep + "application_name=" + url.QueryEscape(e.appName)
	e.relayEnv = append(os.Environ(), envDB+"="+relayURL, envSchema+"="+e.schema)
	f, err := os.Create(filepath.Join(t.TempDir(), "relays.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(f.Name()); err == nil {
				if len(b) > 8<<10 {
					b = b[len(b)-8<<10:]
				}
				t.Logf("relays' log (tail):\n%s", b)
			}
		}
		_ = f.Close()
	})
	e.logFile = f
	return e
}

// counts are the faults injected.
type counts struct {
	kills, heldKills, stops, proxyStalls, drops, cuts, outages, connKills, sessionsKilled, dbRestarts atomic.Int64
}

// TestFaults is issue 9's suite: writers enqueue on keys (a tenth of them
// rolling back) while relay processes are SIGKILLed (at random, and held
// between claim and publish and between publish and mark), one is
// SIGSTOPped past its claim timeout, the broker is stopped and restarted,
// its path stalled, dropped and cut, the relays' database sessions are
// terminated and the database restarted; bad input is mixed in. Then a
// plain JetStream consumer and the inbox check that nothing committed was
// lost, nothing rolled back arrived, each key kept its commit order, and
// every effect was applied exactly once.
func TestFaults(t *testing.T) {
	pl := planFor()
	e := newEnv(t)
	ctx := context.Background()
	s := `"` + e.schema + `"`

	// The outbox, the business tables (a counter per key gives each event
	// its commit rank within its key, as relay's chaos test does), the
	// inbox and its effects.
	store, err := postgres.New(e.pool, &postgres.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := postgres.NewPgxDriver(&postgres.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(d, nil)
	if _, err := e.pool.Exec(ctx, `CREATE TABLE `+s+`.counters (key text PRIMARY KEY, n int NOT NULL DEFAULT 0);
		CREATE TABLE `+s+`.log (id uuid PRIMARY KEY, key text NOT NULL, n int NOT NULL);
		CREATE TABLE `+s+`.effects (msg_id uuid NOT NULL);
		INSERT INTO `+s+`.counters (key) SELECT 'key-' || g FROM generate_series(0, `+fmt.Sprint(pl.keys-1)+`) g;
		INSERT INTO `+s+`.counters (key) VALUES ('bad-k')`); err != nil {
		t.Fatal(err)
	}
	ind, err := pginbox.NewPgx(e.pool, &pginbox.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := ind.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	// The private broker, with a low max_payload, behind the proxy the
	// relays go through; the checker and the inbox's subscriber connect
	// to it directly.
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.MaxPayload = 64 << 10 })
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	prefix, stream := natstest.NewStream(t, nc)
	// The stream refuses messages over 32 KiB: a refusal by the broker
	// itself, after the publisher sent the message.
	{
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := js.Stream(sctx, stream)
		if err == nil {
			sc := st.CachedInfo().Config
			sc.MaxMsgSize = 32 << 10
			_, err = js.UpdateStream(sctx, sc)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	dlPrefix, _ := natstest.NewStream(t, nc)
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, u.Host)

	// A plain core-NATS subscriber sees every publish the server receives,
	// including the re-publishes JetStream's duplicate window drops from
	// the stream: the relays' re-publishes, counted best effort (it misses
	// what is published while it reconnects).
	wire := map[string]int{}
	var wireMu sync.Mutex
	wc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wc.Close)
	ws, err := wc.Subscribe(prefix+".>", func(m *nats.Msg) {
		wireMu.Lock()
		wire[m.Header.Get("Nats-Msg-Id")]++
		wireMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = ws.SetPendingLimits(-1, -1)
	e.relayEnv = append(e.relayEnv, envNATS+"=nats://"+px.addr(), envPrefix+"="+prefix)

	// The inbox: effects applied exactly once, whatever arrives twice.
	in := inbox.New(ind, nil)
	var inboxDups atomic.Int64
	sub, err := natssub.New(natstest.JetStream(t, srv.Connect(t)), in,
		func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+s+`.effects (msg_id) VALUES ($1)`, m.ID)
			return err
		},
		natssub.Config{Stream: stream, Durable: durable, SubjectPrefix: prefix, DeadLetterSubject: dlPrefix + ".dead",
			MaxDeliver: 10000, Backoff: natssub.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
			AckWait: 5 * time.Second, Concurrency: 4, AckTimeout: 2 * time.Second, ShutdownTimeout: 5 * time.Second,
			Hooks: natssub.Hooks{AfterCommit: func(_ inbox.Message, o inbox.Outcome) {
				if o == inbox.Duplicate {
					inboxDups.Add(1)
				}
			}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sub.Stop(sctx)
	})

	procs := make([]*relayProc, pl.relays)
	for i := range procs {
		procs[i] = &relayProc{e: e}
		if err := procs[i].start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.signal(syscall.SIGCONT)
			p.kill()
		}
	})

	// Writers: 8 at once on random keys, a tenth rolling back on purpose.
	// A transaction that fails for a fault is not retried: the log table,
	// not the writer, says what committed.
	var (
		committed, writeErrors atomic.Int64
		rbMu                   sync.Mutex
		rolledBack             []uuid.UUID
	)
	write := func(key string, rollback bool) (uuid.UUID, error) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: key, Type: "Counted",
			Payload: []byte(`{"key":"` + key + `"}`), Headers: map[string]string{"traceparent": "00-faults"}}
		err := pgx.BeginFunc(wctx, e.pool, func(tx pgx.Tx) error {
			if err := ob.Enqueue(wctx, tx, m); err != nil {
				return err
			}
			if _, err := tx.Exec(wctx, `WITH c AS (UPDATE `+s+`.counters SET n = n + 1 WHERE key = $2 RETURNING n)
				INSERT INTO `+s+`.log (id, key, n) SELECT $1, $2, n FROM c`, m.ID, key); err != nil {
				return err
			}
			if rollback {
				return errRollbackOnPurpose
			}
			return nil
		})
		return m.ID, err
	}
	stopWriting := make(chan struct{})
	var writers sync.WaitGroup
	for range 8 {
		writers.Go(func() {
			tick := time.NewTicker(pl.pace)
			defer tick.Stop()
			for {
				select {
				case <-stopWriting:
					return
				case <-tick.C:
				}
				rollback := rand.IntN(10) == 0
				id, err := write(fmt.Sprintf("key-%d", rand.IntN(pl.keys)), rollback)
				switch {
				case rollback && errors.Is(err, errRollbackOnPurpose):
					rbMu.Lock()
					rolledBack = append(rolledBack, id)
					rbMu.Unlock()
				case err != nil:
					writeErrors.Add(1) // a fault; the log table decides
				default:
					committed.Add(1)
				}
			}
		})
	}
	stopWriters := sync.OnceFunc(func() { close(stopWriting); writers.Wait() })
	t.Cleanup(stopWriters)

	// Random kills of every relay but the first (the one SIGSTOPped).
	var c counts
	killerDone := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for {
			d := pl.killEvery[0] + rand.N(pl.killEvery[1]-pl.killEvery[0])
			select {
			case <-killerDone:
				return
			case <-time.After(d):
			}
			p := procs[1+rand.IntN(len(procs)-1)]
			p.kill()
			c.kills.Add(1)
			if err := p.start(); err != nil {
				t.Errorf("restart relay: %v", err)
				return
			}
		}
	})
	stopKiller := sync.OnceFunc(func() { close(killerDone); killer.Wait() })
	t.Cleanup(stopKiller)

	pause := func(d time.Duration) {
		tm := time.NewTimer(d)
		defer tm.Stop()
		<-tm.C
	}
	begin := time.Now()
	// Let a backlog build and the relays get going.
	waitFor(t, "the first events to commit", 30*time.Second, func() bool { return committed.Load() > 100 })

	var bad badInput
	for round := range pl.rounds {
		t.Logf("%s: round %d of %d at %v", pl.name, round+1, pl.rounds, time.Since(begin).Round(time.Millisecond))
		for _, mode := range []string{"hold-claim", "hold-publish"} {
			n, err := e.holdAndKill(mode)
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
			bad = enqueueBadInput(t, ob, e.pool, s, write)
		}

		procs[0].signal(syscall.SIGSTOP)
		c.stops.Add(1)
		pause(claimTimeout + time.Second)
		procs[0].signal(syscall.SIGCONT)
		pause(300 * time.Millisecond)

		n, err := e.killConns(ctx)
		if err != nil {
			t.Errorf("terminate the relays' sessions: %v", err)
		}
		c.connKills.Add(1)
		c.sessionsKilled.Add(int64(n))
		pause(500 * time.Millisecond)

		out := pl.outage()
		srv.Shutdown()
		c.outages.Add(1)
		pause(out)
		srv.Start()
		t.Logf("broker was down for %v", out)
		pause(500 * time.Millisecond)

		px.stall(true)
		c.proxyStalls.Add(1)
		pause(pl.stall)
		px.stall(false)
		pause(500 * time.Millisecond)

		px.drop()
		c.drops.Add(1)
		pause(500 * time.Millisecond)

		px.setCut(true)
		px.drop()
		c.cuts.Add(1)
		pause(pl.cut)
		px.setCut(false)
		pause(500 * time.Millisecond)

		if e.cluster != nil {
			if err := e.cluster.restart(); err != nil {
				t.Errorf("restart the database: %v", err)
			} else {
				c.dbRestarts.Add(1)
			}
			pause(500 * time.Millisecond)
		}
		n, err = e.killConns(ctx)
		if err != nil {
			t.Errorf("terminate the relays' sessions: %v", err)
		}
		c.connKills.Add(1)
		c.sessionsKilled.Add(int64(n))
	}
	lastFault := time.Now()
	stopKiller()
	stopWriters()

	// Drain: no pending event left.
	waitFor(t, "the relays to drain the outbox after the last fault", 120*time.Second, func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.messages WHERE status = 0`).Scan(&n)
		return err == nil && n == 0
	})
	drain := time.Since(lastFault)

	// What committed, with each event's commit rank within its key.
	rank := map[string]int{}
	keyOf := map[string]string{}
	rows, err := e.pool.Query(ctx, `SELECT id, key, n FROM `+s+`.log`)
	if err != nil {
		t.Fatal(err)
	}
	var id uuid.UUID
	var key string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &key, &n}, func() error {
		rank[id.String()], keyOf[id.String()] = n, key
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Dead events: exactly the bad input, each with a clear error.
	dead := map[string]string{}
	rows, err = e.pool.Query(ctx, `SELECT id, coalesce(last_error, '') FROM `+s+`.messages WHERE status = 2`)
	if err != nil {
		t.Fatal(err)
	}
	var lastErr string
	if _, err := pgx.ForEachRow(rows, []any{&id, &lastErr}, func() error {
		dead[id.String()] = lastErr
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	deadOK := 0
	for _, b := range bad.dead {
		switch le, ok := dead[b.id.String()]; {
		case !ok:
			t.Errorf("bad input %q was not dead-lettered", b.what)
		case !strings.Contains(le, b.want):
			t.Errorf("bad input %q dead with last_error %q, want it to mention %q", b.what, le, b.want)
		default:
			deadOK++
			t.Logf("dead-lettered %s: %s", b.what, le)
		}
		delete(dead, b.id.String())
	}
	for id, le := range dead {
		t.Errorf("event %s dead, and it was no bad input: %s", id, le)
	}

	// The plain consumer: everything the stream holds.
	msgs := natstest.WaitForCount(t, js, stream, len(rank), 60*time.Second)
	seen := map[string]bool{}
	last := map[string]int{}
	dups, violations, phantom := 0, 0, 0
	for _, m := range msgs {
		mid := m.Headers().Get("Nats-Msg-Id")
		if seen[mid] {
			dups++
			continue
		}
		seen[mid] = true
		r, ok := rank[mid]
		if !ok {
			phantom++
			t.Errorf("event %s arrived but never committed", mid)
			continue
		}
		k := keyOf[mid]
		if r <= last[k] {
			violations++
			t.Errorf("key %s: event of commit rank %d arrived after rank %d", k, r, last[k])
		}
		last[k] = r
	}
	lost := 0
	for mid := range rank {
		if !seen[mid] {
			lost++
		}
	}
	for _, id := range rolledBack {
		if seen[id.String()] {
			t.Errorf("rolled-back event %s arrived", id)
		}
	}

	// The inbox: once the consumer has nothing pending, one effect per
	// committed event, none for anything else.
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the inbox's consumer to catch up", 60*time.Second, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		info, err := cons.Info(cctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	effects := map[string]int{}
	rows, err = e.pool.Query(ctx, `SELECT msg_id, count(*) FROM `+s+`.effects GROUP BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		effects[id.String()] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	applied, effectErrs := 0, 0
	for mid, n := range effects {
		applied += n
		if _, ok := rank[mid]; !ok || n != 1 {
			effectErrs++
			t.Errorf("event %s: %d effects (committed: %v), want exactly one per committed event", mid, n, ok)
		}
	}
	for mid := range rank {
		if effects[mid] == 0 {
			effectErrs++
			t.Errorf("committed event %s: no effect", mid)
		}
	}

	tbl := newTable()
	tbl.row("mode", pl.name)
	tbl.row("relay processes", pl.relays)
	tbl.row("run (faults)", lastFault.Sub(begin).Round(100*time.Millisecond))
	tbl.row("events committed", len(rank))
	tbl.row("transactions rolled back on purpose", len(rolledBack))
	tbl.row("transactions failed by faults", writeErrors.Load())
	tbl.row("relay kills (SIGKILL)", fmt.Sprintf("%d (%d held between claim/publish or publish/mark)", c.kills.Load(), c.heldKills.Load()))
	tbl.row("stalls", fmt.Sprintf("%d (%d SIGSTOP past the claim timeout, %d proxy stalls)", c.stops.Load()+c.proxyStalls.Load(), c.stops.Load(), c.proxyStalls.Load()))
	tbl.row("broker outages", c.outages.Load())
	tbl.row("proxy drops / cuts", fmt.Sprintf("%d / %d", c.drops.Load(), c.cuts.Load()))
	tbl.row("connection kills", fmt.Sprintf("%d (%d sessions terminated)", c.connKills.Load(), c.sessionsKilled.Load()))
	tbl.row("database restarts", c.dbRestarts.Load())
	tbl.row("bad input dead-lettered", fmt.Sprintf("%d of %d (+%d refused at Enqueue)", deadOK, len(bad.dead), bad.refused))
	tbl.row("lost", lost)
	tbl.row("phantom", phantom)
	tbl.row("order violations", violations)
	tbl.row("duplicates in the stream", dups)
	wireMu.Lock()
	republished := 0
	for _, n := range wire {
		republished += n - 1
	}
	wireMu.Unlock()
	tbl.row("re-publishes the stream's dedup dropped", fmt.Sprintf("%d (seen on the wire)", republished))
	tbl.row("inbox effects applied", fmt.Sprintf("%d (%d wrong)", applied, effectErrs))
	tbl.row("redeliveries the inbox dropped", inboxDups.Load())
	tbl.row("time to drain after the last fault", drain.Round(10*time.Millisecond))
	t.Logf("fault-injection summary (PostgreSQL + NATS JetStream):\n%s", tbl)

	if lost > 0 {
		t.Errorf("%d committed events never arrived", lost)
	}
	if c.kills.Load() == 0 || c.outages.Load() == 0 {
		t.Errorf("no relay killed or no outage: the run proved nothing")
	}
	if len(rank) < 100 {
		t.Errorf("only %d events committed", len(rank))
	}
}

var errRollbackOnPurpose = errors.New("rollback on purpose")

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
