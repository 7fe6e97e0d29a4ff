package sidekiq_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/sidekiq"
)

// e2eTables are the worker's tables (testdata/worker.rb), in the test's
// schema: the idempotent job's record of processed jids (the unique index
// that dedups), its effects, and the duplicates it skipped.
const e2eTables = `
CREATE TABLE sidekiq_processed_jobs (
  jid          text PRIMARY KEY,
  event_id     uuid NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE effects (
  event_id uuid PRIMARY KEY, jid text NOT NULL, jid_ok boolean NOT NULL, n int NOT NULL,
  key text NOT NULL, type text NOT NULL, trace text, ran_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE skipped (jid text NOT NULL, event_id uuid NOT NULL);
`

// dupPublisher publishes every batch, then publishes again every other
// message that was acknowledged: what a relay that died between Redis's
// reply and its mark would do. resent counts the second acknowledgements.
type dupPublisher struct {
	*sidekiq.Publisher
	resent atomic.Int64
}

func (d *dupPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := d.Publisher.Publish(ctx, msgs)
	var again []outbox.Message
	for i, err := range errs {
		if err == nil && i%2 == 0 {
			again = append(again, msgs[i])
		}
	}
	if len(again) > 0 {
		for _, err := range d.Publisher.Publish(ctx, again) {
			if err == nil {
				d.resent.Add(1)
			}
		}
	}
	return errs
}

// TestSidekiqEndToEnd: a service enqueues events in its transactions, some
// rolled back; the relay pushes the committed ones (every other one
// twice); a real Sidekiq (Debian's ruby-sidekiq) runs the idempotent job
// of testdata/idempotent_job.rb, which writes to PostgreSQL. Each
// committed event's effect happens exactly once, the duplicates are
// skipped, rolled-back events never run, and delayed events run after
// their time — both those the relay holds back (NotBefore) and one pushed
// straight to the schedule set.
func TestSidekiqEndToEnd(t *testing.T) {
	rdb := connect(t)
	requireSidekiq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// One simple query, one implicit transaction: SET LOCAL holds for it.
	if _, err := pool.Exec(ctx, `SET LOCAL search_path TO "`+schema+`";`+e2eTables); err != nil {
		t.Fatal(err)
	}

	ns, queue := newNamespace(t, rdb), "e2e"
	pub := newPublisher(t, sidekiq.PublisherConfig{URL: redisURL(), Namespace: ns, Class: "OutboxE2EJob", Queue: queue})
	t.Cleanup(func() { _ = pub.Close() })
	dup := &dupPublisher{Publisher: pub}
	logs := startSidekiq(t, ns, queue, schema)

	// The service: 40 transactions of one event each, every fourth rolled
	// back, every fifth delayed by 2 s.
	ob := outbox.New(db, nil)
	committed := map[uuid.UUID]outbox.Message{}
	var rolledBack []uuid.UUID
	for i := range 40 {
		m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprintf("order-%d", i%3), Type: "OrderPlaced",
			Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Headers: map[string]string{"trace": fmt.Sprintf("t-%d", i)}}
		if i%5 == 0 {
			m.NotBefore = time.Now().Add(2 * time.Second)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.Enqueue(ctx, tx, m); err != nil {
			t.Fatal(err)
		}
		if i%4 == 3 {
			err, rolledBack = tx.Rollback(ctx), append(rolledBack, m.ID)
		} else {
			err, committed[m.ID] = tx.Commit(ctx), m
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	r, err := relay.New(db.Store(), dup, &relay.Config{PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("relay Stop: %v", err)
		}
	})

	// A job pushed straight to the schedule set, 3 s ahead: Sidekiq's
	// poller moves it to its queue when it is due.
	direct := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "direct", Type: "Scheduled",
		Payload: []byte(`{"n":-1}`), Headers: map[string]string{"trace": "direct"}, NotBefore: time.Now().Add(3 * time.Second)}
	for _, err := range pub.Publish(ctx, []outbox.Message{direct}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.ZCard(ctx, ns+":schedule").Result(); err != nil || n != 1 {
		t.Fatalf("the schedule set holds %d jobs (%v), want the direct one", n, err)
	}
	committed[direct.ID] = direct

	effects := waitForEffects(t, ctx, pool, rdb, schema, ns, logs, len(committed), &dup.resent)

	for id, e := range effects {
		m, ok := committed[id]
		switch {
		case !ok:
			t.Errorf("event %s ran but was never committed", id)
		case !e.jidOK || e.jid != sidekiq.JID(id):
			t.Errorf("event %s: jid %q, the Ruby derivation agrees: %v", id, e.jid, e.jidOK)
		case string(m.Payload) != fmt.Sprintf(`{"n":%d}`, e.n) || e.key != m.Key || e.typ != m.Type || e.trace != m.Headers["trace"]:
			t.Errorf("event %s ran with n=%d key %q type %q trace %q, want %s %q %q %q", id, e.n, e.key, e.typ, e.trace, m.Payload, m.Key, m.Type, m.Headers["trace"])
		case !m.NotBefore.IsZero() && e.ranAt.Before(m.NotBefore):
			t.Errorf("event %s ran at %v, before its time %v", id, e.ranAt, m.NotBefore)
		}
	}
	for id := range committed {
		if _, ok := effects[id]; !ok {
			t.Errorf("committed event %s never ran", id)
		}
	}
	for _, id := range rolledBack {
		if _, ok := effects[id]; ok {
			t.Errorf("rolled-back event %s ran", id)
		}
	}
	t.Logf("%d committed events ran once each, %d duplicates skipped, %d rolled back never ran", len(effects), dup.resent.Load(), len(rolledBack))
}

// effect is a row of the worker's effects table.
type effect struct {
	jid             string
	jidOK           bool
	n               int
	key, typ, trace string
	ranAt           time.Time
}

// waitForEffects waits until the worker recorded want effects and skipped
// as many duplicates as were re-sent, failing early when Sidekiq exits or
// a job fails (it lands in the retry set), and returns the effects.
func waitForEffects(t *testing.T, ctx context.Context, pool *pgxpool.Pool, rdb *goredis.Client, schema, ns string, logs *sidekiqProc, want int, resent *atomic.Int64) map[uuid.UUID]effect {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var n, skipped, pending int
	for {
		// The outbox table empty (the relay deletes what it published),
		// every re-send has been made: resent is final.
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM "`+schema+`".effects), (SELECT count(*) FROM "`+schema+`".skipped),
			(SELECT count(*) FROM "`+schema+`".messages)`).Scan(&n, &skipped, &pending); err != nil {
			t.Fatal(err)
		}
		if pending == 0 && n >= want && int64(skipped) >= resent.Load() {
			break
		}
		if failed, _ := rdb.ZRange(ctx, ns+":retry", 0, 0).Result(); len(failed) > 0 {
			t.Fatalf("a job failed: %s\nSidekiq's log:\n%s", failed[0], logs.tail())
		}
		if logs.exited() {
			t.Fatalf("sidekiq exited: %v\nits log:\n%s", logs.err, logs.tail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 min: %d effects of %d, %d duplicates skipped of %d re-sent, %d events pending\nSidekiq's log:\n%s", n, want, skipped, resent.Load(), pending, logs.tail())
		}
		<-tick.C
	}
	if int64(skipped) != resent.Load() || skipped == 0 {
		t.Errorf("%d duplicates skipped, %d re-sent (want as many, and some)", skipped, resent.Load())
	}
	rows, err := pool.Query(ctx, `SELECT event_id, jid, jid_ok, n, key, type, coalesce(trace, ''), ran_at FROM "`+schema+`".effects`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[uuid.UUID]effect{}
	for rows.Next() {
		var id uuid.UUID
		var e effect
		if err := rows.Scan(&id, &e.jid, &e.jidOK, &e.n, &e.key, &e.typ, &e.trace, &e.ranAt); err != nil {
			t.Fatal(err)
		}
		out[id] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireSidekiq ends the test (see testenv.Unreachable) unless Debian's
// ruby-sidekiq, ruby-pg and ruby-redis-namespace are installed.
func requireSidekiq(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("sidekiq"); err != nil {
		testenv.Unreachable(t, "ruby-sidekiq (Debian)", err)
	}
	out, err := exec.Command("ruby", "-e", `require "sidekiq"; require "pg"; require "redis/namespace"; print Sidekiq::VERSION`).CombinedOutput()
	if err != nil {
		testenv.Unreachable(t, "ruby-sidekiq, ruby-pg and ruby-redis-namespace (Debian)", fmt.Errorf("%v: %s", err, out))
	}
	t.Logf("Sidekiq %s", out)
}

// sidekiqProc is a Sidekiq process of the test's own.
type sidekiqProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (s *sidekiqProc) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's log.
func (s *sidekiqProc) tail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// startSidekiq starts `sidekiq -r ./testdata/worker.rb -q queue -c 2` on
// the shared Redis under the namespace ns, its jobs writing to schema, in
// a process group of its own, stopped (the whole group) at cleanup.
func startSidekiq(t *testing.T, ns, queue, schema string) *sidekiqProc {
	t.Helper()
	dbURL := pgtest.URL() + "&options=" + url.QueryEscape("-csearch_path="+schema)
	logPath := filepath.Join(t.TempDir(), "sidekiq.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sidekiq", "-r", "./testdata/worker.rb", "-q", queue, "-c", "2", "-t", "5")
	cmd.Env = append(os.Environ(), "REDIS_URL="+redisURL(), "SIDEKIQ_NAMESPACE="+ns, "DATABASE_URL="+dbURL, "RUBYOPT=-W0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		testenv.Unreachable(t, "ruby-sidekiq (Debian)", err)
	}
	_ = logf.Close()
	s := &sidekiqProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Errorf("sidekiq did not stop within 30 s of SIGTERM: killed\nits log:\n%s", s.tail())
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.done
		}
		// Whatever the group still holds (it should hold nothing).
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill sidekiq's process group: %v", err)
		}
	})
	return s
}
