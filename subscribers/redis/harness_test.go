package redis_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/pgtest"
	"github.com/outboxgo/outbox/internal/testenv"
	redispub "github.com/outboxgo/outbox/publishers/redis"
	redissub "github.com/outboxgo/outbox/subscribers/redis"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func redisURL() string {
	return testenv.Getenv("OUTBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
}

var seq atomic.Int64

// bundle is what a subscriber test needs: its own schema (inbox and effects
// tables) and its own stream prefix.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	in     *inbox.Inbox[pgx.Tx]
	rdb    *goredis.Client
	prefix string
}

func setup(t testing.TB) *bundle {
	t.Helper()
	opts, err := goredis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		testenv.Unreachable(t, "Redis at "+redisURL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("outbox-subtest:%d:%d:", os.Getpid(), seq.Add(1))
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	d, err := pginbox.NewPgx(pool, &pginbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+schema+`".effects (msg_id uuid NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, schema: schema, in: inbox.New(d, nil), rdb: rdb, prefix: prefix}
}

func (b *bundle) stream() string     { return b.prefix + "orders" }
func (b *bundle) deadStream() string { return b.prefix + "dead" }

// config is a subscriber config for the bundle's stream, quick to retry.
func (b *bundle) config(group string) redissub.Config {
	return redissub.Config{Streams: []string{b.stream()}, StreamPrefix: b.prefix, Group: group,
		DeadLetterStream: b.deadStream(), ClaimIdle: 2 * time.Second, PollInterval: 5 * time.Millisecond,
		Block: 50 * time.Millisecond, Backoff: redissub.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
}

func (b *bundle) effect(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	_, err := tx.Exec(ctx, `INSERT INTO "`+b.schema+`".effects VALUES ($1, $2)`, m.ID, m.Topic)
	return err
}

func (b *bundle) effects(t testing.TB, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+b.schema+`".effects WHERE msg_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bundle) allEffects(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+b.schema+`".effects`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// publish publishes msgs through the outbox's own Redis publisher.
func (b *bundle) publish(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	p, err := redispub.New(redispub.Config{Client: b.rdb, StreamPrefix: b.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	for i, err := range p.Publish(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

func events(n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", Type: "OrderConfirmed",
			Payload: []byte(`{"n":1}`), Headers: map[string]string{"correlation-id": "c1"}, CreatedAt: time.Now().UTC()}
	}
	return out
}

// settled reports whether the group holds no pending entry.
func (b *bundle) settled(t testing.TB, group string) bool {
	t.Helper()
	p, err := b.rdb.XPending(context.Background(), b.stream(), group).Result()
	if err != nil {
		t.Fatal(err)
	}
	return p.Count == 0
}

func start(t testing.TB, b *bundle, h inbox.Handler[pgx.Tx], cfg redissub.Config) *redissub.Subscriber[pgx.Tx] {
	t.Helper()
	s, err := redissub.New(b.rdb, b.in, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return s
}

type recorder struct {
	mu  sync.Mutex
	all []redissub.Settlement
}

func (r *recorder) add(s redissub.Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
}

func (r *recorder) list() []redissub.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]redissub.Settlement(nil), r.all...)
}

func (r *recorder) count(a redissub.Action) int {
	n := 0
	for _, s := range r.list() {
		if s.Action == a {
			n++
		}
	}
	return n
}

// waitFor polls cond on a ticker until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}
