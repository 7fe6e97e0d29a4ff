package rabbitmq_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/pgtest"
	"github.com/outboxgo/outbox/internal/testenv"
	rabbitpub "github.com/outboxgo/outbox/publishers/rabbitmq"
	rabbitsub "github.com/outboxgo/outbox/subscribers/rabbitmq"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func rabbitURL() string {
	return testenv.Getenv("OUTBOX_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
}

var seq atomic.Int64

// bundle is what a subscriber test needs: its own schema (inbox and effects
// tables), its own exchange, queue and dead-letter queue.
type bundle struct {
	pool            *pgxpool.Pool
	schema          string
	in              *inbox.Inbox[pgx.Tx]
	conn            *amqp.Connection
	ch              *amqp.Channel
	exchange, queue string
	deadQueue       string
}

func setup(t testing.TB) *bundle {
	t.Helper()
	conn, err := amqp.DialConfig(rabbitURL(), amqp.Config{Dial: amqp.DefaultDial(2 * time.Second)})
	if err != nil {
		testenv.Unreachable(t, "RabbitMQ at "+rabbitURL(), err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("outbox-subtest-%d-%d", os.Getpid(), seq.Add(1))
	b := &bundle{conn: conn, ch: ch, exchange: name, queue: name, deadQueue: name + "-dead"}
	if err := ch.ExchangeDeclare(name, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{b.queue, b.deadQueue} {
		if _, err := ch.QueueDeclare(q, false, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.QueueBind(b.queue, "orders", name, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ch.QueueDelete(b.queue, false, false, false)
		_, _ = ch.QueueDelete(b.deadQueue, false, false, false)
		_ = ch.ExchangeDelete(name, false, false)
	})
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
	b.pool, b.schema, b.in = pool, schema, inbox.New(d, nil)
	return b
}

// config is a subscriber config for the bundle's queues, quick to retry.
func (b *bundle) config() rabbitsub.Config {
	return rabbitsub.Config{URL: rabbitURL(), Queue: b.queue, DeadLetterRoutingKey: b.deadQueue,
		ReconnectDelay: 20 * time.Millisecond,
		Backoff:        rabbitsub.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
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

// publish publishes msgs through the outbox's own RabbitMQ publisher.
func (b *bundle) publish(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	p, err := rabbitpub.New(rabbitpub.Config{URL: rabbitURL(), Exchange: b.exchange})
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

// ready is how many messages the queue holds ready (not counting those
// delivered and not yet acknowledged).
func (b *bundle) ready(t testing.TB, queue string) int {
	t.Helper()
	q, err := b.ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

// dead gets the dead letters, n of them, waiting for them.
func (b *bundle) dead(t testing.TB, n int) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	waitFor(t, fmt.Sprintf("%d dead letters", n), 30*time.Second, func() bool {
		d, ok, err := b.ch.Get(b.deadQueue, true)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out = append(out, d)
		}
		return len(out) >= n
	})
	return out
}

func start(t testing.TB, b *bundle, h inbox.Handler[pgx.Tx], cfg rabbitsub.Config) *rabbitsub.Subscriber[pgx.Tx] {
	t.Helper()
	s, err := rabbitsub.New(b.in, h, cfg)
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
	all []rabbitsub.Settlement
}

func (r *recorder) add(s rabbitsub.Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
}

func (r *recorder) list() []rabbitsub.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rabbitsub.Settlement(nil), r.all...)
}

func (r *recorder) count(a rabbitsub.Action) int {
	n := 0
	for _, s := range r.list() {
		if s.Action == a {
			n++
		}
	}
	return n
}

func (r *recorder) actions() string {
	var out []string
	for _, s := range r.list() {
		out = append(out, s.Action.String())
	}
	return strings.Join(out, ",")
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
