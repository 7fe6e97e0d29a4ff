package nats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/natstest"
	"github.com/outboxgo/outbox/internal/pgtest"
	natspub "github.com/outboxgo/outbox/publishers/nats"
	natssub "github.com/outboxgo/outbox/subscribers/nats"
)

// bundle is what a subscriber test needs: its own schema (inbox and effects
// tables), its own stream and its own dead-letter stream.
type bundle struct {
	pool             *pgxpool.Pool
	schema           string
	in               *inbox.Inbox[pgx.Tx]
	nc               *nats.Conn
	js               jetstream.JetStream
	prefix, stream   string
	dlSubject, dlStr string
}

func setup(t testing.TB) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	d, err := pginbox.NewPgx(pool, &pginbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+schema+`".effects (msg_id uuid NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	dlPrefix, dlStream := natstest.NewStream(t, nc)
	return &bundle{pool: pool, schema: schema, in: inbox.New(d, nil), nc: nc, js: natstest.JetStream(t, nc),
		prefix: prefix, stream: stream, dlSubject: dlPrefix + ".dead", dlStr: dlStream}
}

// config is a subscriber config for the bundle's streams, quick to retry.
func (b *bundle) config(durable string) natssub.Config {
	return natssub.Config{Stream: b.stream, Durable: durable, SubjectPrefix: b.prefix,
		DeadLetterSubject: b.dlSubject, Backoff: natssub.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
}

// effect is the handler's effect: a row in the effects table.
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

// effectCounts maps each message ID with an effect to its number of effects.
func (b *bundle) effectCounts(t testing.TB) map[uuid.UUID]int {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT msg_id, count(*) FROM "`+b.schema+`".effects GROUP BY msg_id`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]int{}
	var id uuid.UUID
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// publish publishes msgs through the outbox's own NATS publisher.
func (b *bundle) publish(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	p, err := natspub.New(natspub.Config{URL: natstest.URL(), SubjectPrefix: b.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range p.Publish(ctx, msgs) {
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

// consumerInfo is the durable consumer's state on the server.
func (b *bundle) consumerInfo(t testing.TB, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, b.stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// settled reports whether the consumer holds nothing: every message
// delivered and acknowledged (or terminated).
func (b *bundle) settled(t testing.TB, durable string) bool {
	info := b.consumerInfo(t, durable)
	return info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0
}

// start starts a subscriber and stops it gracefully at cleanup.
func start(t testing.TB, b *bundle, h inbox.Handler[pgx.Tx], cfg natssub.Config) *natssub.Subscriber[pgx.Tx] {
	t.Helper()
	s, err := natssub.New(b.js, b.in, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
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

// recorder collects settlements.
type recorder struct {
	mu  sync.Mutex
	all []natssub.Settlement
}

func (r *recorder) add(s natssub.Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
}

func (r *recorder) list() []natssub.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]natssub.Settlement(nil), r.all...)
}

func (r *recorder) count(a natssub.Action) int {
	n := 0
	for _, s := range r.list() {
		if s.Action == a {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
}
