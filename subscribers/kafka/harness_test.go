package kafka_test

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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/pgtest"
	"github.com/outboxgo/outbox/internal/testenv"
	kafkapub "github.com/outboxgo/outbox/publishers/kafka"
	kafkasub "github.com/outboxgo/outbox/subscribers/kafka"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const partitions = 3

var seq atomic.Int64

// bundle is what a subscriber test needs: its own schema (inbox and effects
// tables) and its own Kafka (kfake, or OUTBOX_TEST_KAFKA_BROKERS) topics.
type bundle struct {
	pool    *pgxpool.Pool
	schema  string
	in      *inbox.Inbox[pgx.Tx]
	brokers []string
	prefix  string
}

func brokers(t testing.TB) []string {
	if v := os.Getenv("OUTBOX_TEST_KAFKA_BROKERS"); v != "" {
		b := strings.Split(v, ",")
		testenv.RequireTCP(t, "Kafka (OUTBOX_TEST_KAFKA_BROKERS)", b[0])
		return b
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(partitions))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func setup(t testing.TB) *bundle {
	t.Helper()
	b := &bundle{brokers: brokers(t), prefix: fmt.Sprintf("outbox-subtest-%d-%d.", os.Getpid(), seq.Add(1))}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	topics := []string{b.topic(), b.deadTopic()}
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics...)
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
	b.pool, b.schema, b.in = pool, schema, inbox.New(d, nil)
	return b
}

func (b *bundle) topic() string     { return b.prefix + "orders" }
func (b *bundle) deadTopic() string { return b.prefix + "dead" }

// config is a subscriber config for the bundle's topics, quick to retry.
func (b *bundle) config(group string) kafkasub.Config {
	return kafkasub.Config{Brokers: b.brokers, Topics: []string{b.topic()}, TopicPrefix: b.prefix, Group: group,
		DeadLetterTopic: b.deadTopic(), Backoff: kafkasub.Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
		Options: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}}
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

// publish publishes msgs through the outbox's own Kafka publisher.
func (b *bundle) publish(t testing.TB, msgs ...outbox.Message) {
	t.Helper()
	p, err := kafkapub.New(kafkapub.Config{Brokers: b.brokers, TopicPrefix: b.prefix})
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

// produce produces raw records.
func (b *bundle) produce(t testing.TB, rs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
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

// lag is how many records of the topic the group has not committed.
func (b *bundle) lag(t testing.TB, group string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, b.topic())
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var lag int64
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup(o.Topic, o.Partition)
		lag += o.Offset - max(c.At, 0)
	})
	return lag
}

// deadLetters reads n records of the dead-letter topic.
func (b *bundle) deadLetters(t testing.TB, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ConsumeTopics(b.deadTopic()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d dead letters after 30s, want %d", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func start(t testing.TB, b *bundle, h inbox.Handler[pgx.Tx], cfg kafkasub.Config) *kafkasub.Subscriber[pgx.Tx] {
	t.Helper()
	s, err := kafkasub.New(b.in, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, s) })
	return s
}

func stop(t testing.TB, s *kafkasub.Subscriber[pgx.Tx]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

type recorder struct {
	mu  sync.Mutex
	all []kafkasub.Settlement
}

func (r *recorder) add(s kafkasub.Settlement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
}

func (r *recorder) list() []kafkasub.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]kafkasub.Settlement(nil), r.all...)
}

func (r *recorder) count(a kafkasub.Action) int {
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
