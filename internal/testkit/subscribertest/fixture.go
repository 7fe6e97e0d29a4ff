package subscribertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
)

// timeout bounds every wait of the suite; it bounds a failure only, so it
// is generous for a loaded machine and for clients that reconnect slowly
// (Google's Pub/Sub client reopens a lost stream with a fixed backoff of up
// to 30 s, which the emulator, on a loaded machine, stretches past a
// minute).
const timeout = 3 * time.Minute

// The backoff of every case: no jitter, so the delays are known.
const (
	backoffMin = 10 * time.Millisecond
	backoffMax = 100 * time.Millisecond
)

// fixture is a case's Env with its database: an inbox table and an effects
// table (no unique key, so that an effect applied twice shows) in a schema
// of the case's own.
type fixture struct {
	Env
	t      *testing.T
	pool   *pgxpool.Pool
	schema string
	in     *inbox.Inbox[pgx.Tx]
}

func setup(t *testing.T, h Harness) *fixture {
	t.Helper()
	return newFixture(t, h.Setup(t))
}

func newFixture(t *testing.T, env Env) *fixture {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := db.Inbox()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ddl := range []string{
		`CREATE TABLE "` + schema + `".effects (seq bigserial PRIMARY KEY, msg_id uuid NOT NULL, note text NOT NULL)`,
		// A row inserted twice here makes the commit fail, not the insert.
		`CREATE TABLE "` + schema + `".deferred (k int, CONSTRAINT deferred_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			t.Fatal(err)
		}
	}
	in, err := inbox.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{Env: env, t: t, pool: pool, schema: schema, in: in}
}

// config is a subscriber config of group with the fixture's inbox and the
// effect handler, quick to retry.
func (f *fixture) config(group string) Config {
	return Config{Inbox: f.in, Handler: f.effect, Group: group,
		Options: subscribers.Options{Backoff: outbox.Backoff{Min: backoffMin, Max: backoffMax}}}
}

// effect is the handler's effect: a row (msg.ID, msg.Key) in the effects
// table.
func (f *fixture) effect(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	_, err := tx.Exec(ctx, `INSERT INTO "`+f.schema+`".effects (msg_id, note) VALUES ($1, $2)`, m.ID, m.Key)
	return err
}

// failCommit makes tx's commit fail (a deferred unique violation).
func (f *fixture) failCommit(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `INSERT INTO "`+f.schema+`".deferred VALUES (1), (1)`)
	return err
}

// effects counts the committed effects of id.
func (f *fixture) effects(id uuid.UUID) int {
	f.t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+f.schema+`".effects WHERE msg_id = $1`, id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// effectOrder returns the message IDs of the committed effects in the
// order they were applied, with their notes (keys).
func (f *fixture) effectOrder() (ids []uuid.UUID, keys []string) {
	f.t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT msg_id, note FROM "`+f.schema+`".effects ORDER BY seq`)
	if err != nil {
		f.t.Fatal(err)
	}
	var id uuid.UUID
	var key string
	if _, err := pgx.ForEachRow(rows, []any{&id, &key}, func() error {
		ids, keys = append(ids, id), append(keys, key)
		return nil
	}); err != nil {
		f.t.Fatal(err)
	}
	return ids, keys
}

// onceEach fails the test unless each of msgs has exactly one effect and
// nothing else has any.
func (f *fixture) onceEach(msgs []outbox.Message) {
	f.t.Helper()
	ids, _ := f.effectOrder()
	count := map[uuid.UUID]int{}
	for _, id := range ids {
		count[id]++
	}
	for _, m := range msgs {
		if count[m.ID] != 1 {
			f.t.Fatalf("message %s: %d effects, want 1", m.ID, count[m.ID])
		}
	}
	if len(ids) != len(msgs) {
		f.t.Fatalf("%d effects, want %d", len(ids), len(msgs))
	}
}

// newSub builds a subscriber of c, failing the test on error.
func (f *fixture) newSub(c Config) Subscriber {
	f.t.Helper()
	s, err := f.New(f.t, c)
	if err != nil {
		f.t.Fatalf("New: %v", err)
	}
	return s
}

// start builds and starts a subscriber of c, stopped gracefully at cleanup
// (again: Stop twice is a no-op).
func (f *fixture) start(c Config) Subscriber {
	f.t.Helper()
	s := f.newSub(c)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		f.t.Fatalf("Start: %v", err)
	}
	t := f.t
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	return s
}

// stop stops s gracefully, failing the test on error.
func (f *fixture) stop(s Subscriber) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		f.t.Fatalf("Stop: %v", err)
	}
}

// held is Env.Held, for group.
func (f *fixture) held(group string) int {
	f.t.Helper()
	return f.Held(f.t, group)
}

// heldBack waits until the broker holds want messages of group again,
// after a stop handed messages back: a broker whose Held leaves out
// delivered messages (Pub/Sub's) may count one only once its lease ends,
// when the client's hand-back did not get through before the client
// stopped — it is still at the broker. It fails with the last count.
func (f *fixture) heldBack(group string, want int, what string) {
	f.t.Helper()
	n := f.held(group)
	if n == want {
		return
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n != want {
		select {
		case <-deadline.C:
			f.t.Fatalf("%s: the broker holds %d messages, want %d", what, n, want)
		case <-tick.C:
		}
		n = f.held(group)
	}
}

// consumer is the consumer a dead letter of group names.
func (f *fixture) consumer(group string) string {
	if f.Consumer == nil {
		return group
	}
	return f.Consumer(group)
}

// events returns n events on topic "orders" with key k1.
func events(n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", Type: "OrderConfirmed",
			Payload: fmt.Appendf(nil, `{"n":%d}`, i), Headers: map[string]string{"correlation-id": "c1"},
			CreatedAt: time.Now().UTC()}
	}
	return out
}

// recorder collects what a subscriber's hooks report, in order.
type recorder struct {
	mu      sync.Mutex
	settled []subscribers.Settlement
	log     []string // "commit <id> <outcome>" and "settle <id> <action>"
	// onCommit, when set, is called on each AfterCommit, after it is
	// logged: a case may block the subscriber there, between commit and
	// acknowledgement.
	onCommit func(inbox.Message, inbox.Outcome)
}

// hook installs the recorder in c.
func (r *recorder) hook(c Config) Config {
	c.Options.Hooks.AfterCommit = r.commit
	c.Options.Hooks.AfterSettle = r.settle
	return c
}

func (r *recorder) commit(m inbox.Message, o inbox.Outcome) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf("commit %s %s", m.ID, o))
	fn := r.onCommit
	r.mu.Unlock()
	if fn != nil {
		fn(m, o)
	}
}

func (r *recorder) settle(s subscribers.Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled = append(r.settled, s)
	r.log = append(r.log, fmt.Sprintf("settle %s %s", s.Message.ID, s.Action))
}

func (r *recorder) list() []subscribers.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]subscribers.Settlement(nil), r.settled...)
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

func (r *recorder) count(a subscribers.Action) int {
	n := 0
	for _, s := range r.list() {
		if s.Action == a {
			n++
		}
	}
	return n
}

// actions lists the settlements' actions, for messages.
func (r *recorder) actions() string {
	var out []string
	for _, s := range r.list() {
		out = append(out, fmt.Sprintf("%s(delivery %d, %v)", s.Action, s.Delivery, s.Err))
	}
	return strings.Join(out, ", ")
}

// waitFor checks cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// waitChan waits for ch, failing the test after timeout.
func waitChan[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// releaser returns a func that closes ch once, and closes it at cleanup
// too, so that a handler or hook waiting on ch does not hold the Stop at
// cleanup when the case fails. Call it after starting the subscriber, so
// that its cleanup runs before the subscriber's Stop.
func releaser(t *testing.T, ch chan struct{}) func() {
	release := sync.OnceFunc(func() { close(ch) })
	t.Cleanup(release)
	return release
}

// gate holds the handler's first delivery of one message until released.
type gate struct {
	id       uuid.UUID
	first    atomic.Bool
	inside   chan struct{} // closed when the handler holds
	released chan struct{}
}

func newGate(id uuid.UUID) *gate {
	return &gate{id: id, inside: make(chan struct{}), released: make(chan struct{})}
}

// wrap returns h held at the gate.
func (g *gate) wrap(h inbox.Handler[pgx.Tx]) inbox.Handler[pgx.Tx] {
	return func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if m.ID == g.id && g.first.CompareAndSwap(false, true) {
			close(g.inside)
			<-g.released
		}
		return h(ctx, tx, m)
	}
}

// errFailing is the error of a handler told to fail.
var errFailing = errors.New("provider unavailable")
