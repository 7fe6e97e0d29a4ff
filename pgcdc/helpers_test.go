package pgcdc_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/pgcdc"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
)

var seq atomic.Int64

// tlog writes the relay's log lines to the test's log.
type tlog struct{ t testing.TB }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// env is one test's world: a schema with the outbox table in the private
// cluster, a slot and publication of its own, a private NATS server and a
// stream of its own.
type env struct {
	t       testing.TB
	cluster *pgCluster // the package's, or a test's own
	pool    *pgxpool.Pool
	db      *postgres.DB
	name    string // schema, slot and publication
	table   string
	nats    *natstest.Server
	js      jetstream.JetStream
	stream  string
	prefix  string
	relays  []*pgcdc.Relay // started by start: their state is logged when a wait times out
}

func newEnv(t testing.TB) *env {
	t.Helper()
	if cluster == nil {
		testenv.Unreachable(t, "a private PostgreSQL cluster (initdb)", clusterErr)
	}
	e := &env{t: t, cluster: cluster, name: fmt.Sprintf("cdc_%d", seq.Add(1))}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cluster.url(e.name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	db, err := postgres.New(pool, &postgres.Config{Schema: e.name, DisableNotify: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e.db = db
	e.table = pgx.Identifier{e.name, "messages"}.Sanitize()
	t.Cleanup(func() {
		// The slot must go, or it pins the cluster's WAL for the others.
		for range 50 {
			_, err := pool.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, e.name)
			if err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a session may still hold it a moment
		}
	})
	e.nats = natstest.StartServer(t, "")
	nc := e.nats.Connect(t)
	e.prefix, e.stream = natstest.NewStream(t, nc)
	e.js = natstest.JetStream(t, nc)
	return e
}

// config is a test relay's configuration: quick intervals.
func (e *env) config() *pgcdc.Config {
	return &pgcdc.Config{
		Logger:     slog.New(slog.NewTextHandler(tlog{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnString: e.cluster.url(e.name + "_relay"), Schema: e.name, Slot: e.name, Publication: e.name,
		StatusInterval: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, HeartbeatInterval: 200 * time.Millisecond,
		MarkInterval: 5 * time.Millisecond, StandbyRetry: 200 * time.Millisecond,
		RetryBackoff:  outbox.Backoff{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond},
		OutageBackoff: outbox.Backoff{Min: 20 * time.Millisecond, Max: 200 * time.Millisecond},
	}
}

// publisher is a nats publisher to the test's stream.
func (e *env) publisher() *outboxnats.Publisher {
	e.t.Helper()
	p, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: e.nats.URL(), SubjectPrefix: e.prefix,
		ReconnectWait: 50 * time.Millisecond, AckTimeout: 5 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	return p
}

// restream changes the test's stream: it is made again (empty) with its
// configuration changed by f.
func (e *env) restream(f func(*jetstream.StreamConfig)) {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	f(&cfg)
	if err := e.js.DeleteStream(ctx, e.stream); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, cfg); err != nil {
		e.t.Fatal(err)
	}
}

// atomicPublisher is a nats publisher to the test's stream, with
// AtomicKeyRuns: the stream is made to allow atomic publish, and the
// publisher is checked to keep key order.
func (e *env) atomicPublisher() *outboxnats.Publisher {
	e.t.Helper()
	e.restream(func(c *jetstream.StreamConfig) { c.AllowAtomicPublish = true })
	p, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: e.nats.URL(), SubjectPrefix: e.prefix,
		ReconnectWait: 50 * time.Millisecond, AckTimeout: 5 * time.Second, AtomicKeyRuns: true})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = p.Close() })
	if !p.KeepsKeyOrder() {
		e.t.Fatal("the AtomicKeyRuns publisher does not keep key order")
	}
	return p
}

// start starts a relay; it is stopped at cleanup.
func (e *env) start(cfg *pgcdc.Config, pub publishers.Publisher) *pgcdc.Relay {
	e.t.Helper()
	r, err := pgcdc.New(cfg, pub)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	e.relays = append(e.relays, r)
	e.waitFor("the relay streams", 30*time.Second, r.Active)
	return r
}

// msg is a new event of key.
func msg(key string) outbox.Message {
	return outbox.Message{ID: outbox.NewID(), Topic: "t", Key: key, Type: "T", Payload: []byte("p-" + key),
		Headers: map[string]string{"h": "v"}, CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// insert enqueues msgs in one transaction; rollback rolls it back instead.
func (e *env) insert(rollback bool, msgs ...outbox.Message) {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.InsertTx(ctx, tx, msgs); err != nil {
		e.t.Fatal(err)
	}
	if rollback {
		err = tx.Rollback(ctx)
	} else {
		err = tx.Commit(ctx)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// insertBefore enqueues msgs in one transaction and returns the WAL
// position just before its commit: a slot confirmed past the transaction
// is confirmed past it.
func (e *env) insertBefore(msgs ...outbox.Message) uint64 {
	e.t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.InsertTx(ctx, tx, msgs); err != nil {
		e.t.Fatal(err)
	}
	var at uint64
	if err := tx.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint`).Scan(&at); err != nil {
		e.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	return at
}

// read waits for n messages in the stream and returns every one stored.
func (e *env) read(n int) []jetstream.Msg {
	e.t.Helper()
	got := natstest.WaitForCount(e.t, e.js, e.stream, n, 60*time.Second)
	if len(got) < n {
		e.t.Fatalf("stream holds %d messages, want %d", len(got), n)
	}
	return got
}

// ids returns the event IDs of ms, in stream order.
func ids(t *testing.T, ms []jetstream.Msg) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, len(ms))
	for i, m := range ms {
		id, err := uuid.Parse(m.Headers().Get(outboxnats.HeaderMsgID))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		out[i] = id
	}
	return out
}

// count counts the outbox rows of status.
func (e *env) count(status int) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+e.table+` WHERE status = $1`, status).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// confirmed is the slot's confirmed_flush_lsn as a number.
func (e *env) confirmed() uint64 {
	e.t.Helper()
	var n uint64
	err := e.pool.QueryRow(context.Background(), `SELECT coalesce(pg_wal_lsn_diff(confirmed_flush_lsn, '0/0'), 0)::bigint
		FROM pg_replication_slots WHERE slot_name = $1`, e.name).Scan(&n)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// currentLSN is the server's current WAL position as a number.
func (e *env) currentLSN() uint64 {
	e.t.Helper()
	var n uint64
	if err := e.pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or within passes.
func (e *env) waitFor(what string, within time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			for i, r := range e.relays {
				e.t.Logf("relay %d: %s", i, pgcdc.State(r))
			}
			if len(e.relays) > 0 {
				e.t.Logf("the relays' goroutines:\n%s", relayGoroutines())
			}
			e.t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// failing wraps a publisher and fails the chosen IDs with err while on.
type failing struct {
	publishers.Publisher
	mu    sync.Mutex
	fail  map[uuid.UUID]error
	tries map[uuid.UUID]int
	order []uuid.UUID // acknowledged, in order
	sent  []uuid.UUID // every try, in order
}

// sentLog returns every try so far, in order.
func (f *failing) sentLog() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uuid.UUID(nil), f.sent...)
}

func newFailing(p publishers.Publisher) *failing {
	return &failing{Publisher: p, fail: map[uuid.UUID]error{}, tries: map[uuid.UUID]int{}}
}

func (f *failing) set(id uuid.UUID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, id)
	} else {
		f.fail[id] = err
	}
}

func (f *failing) triesOf(id uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tries[id]
}

func (f *failing) acked() []uuid.UUID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]uuid.UUID(nil), f.order...)
}

func (f *failing) Publish(ctx context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	var pass []outbox.Message
	var at []int
	f.mu.Lock()
	for i, m := range msgs {
		f.tries[m.ID]++
		f.sent = append(f.sent, m.ID)
		if err := f.fail[m.ID]; err != nil {
			errs[i] = err
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	f.mu.Unlock()
	if len(pass) > 0 {
		res := f.Publisher.Publish(ctx, pass)
		f.mu.Lock()
		for j, i := range at {
			errs[i] = res[j]
			if res[j] == nil {
				f.order = append(f.order, msgs[i].ID)
			}
		}
		f.mu.Unlock()
	}
	return errs
}

var errBroker = errors.New("the broker says no")

// pos returns the index of each ID in list.
func pos(list []uuid.UUID) map[uuid.UUID]int {
	m := make(map[uuid.UUID]int, len(list))
	for i, id := range list {
		m[id] = i
	}
	return m
}

var _ = natsgo.DefaultURL

// nopPublisher acknowledges everything.
type nopPublisher struct{}

func (nopPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	return make([]error, len(msgs))
}
func (nopPublisher) Close() error { return nil }

// relayGoroutines returns the stacks of the goroutines running the relay
// package's code.
func relayGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "outbox/pgcdc.(*") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
