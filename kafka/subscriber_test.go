package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/kafka"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/subscribers"
)

func TestSubscriberConfigChecks(t *testing.T) {
	in := new(inbox.Inbox[pgx.Tx]) // never used: the config is refused first
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]struct {
		cfg  *kafka.SubscriberConfig
		want string // in the error
	}{
		"nil":                  {nil, "Topics is required"},
		"no topics":            {&kafka.SubscriberConfig{Group: "g", DeadLetterTopic: "d"}, "Topics"},
		"no group":             {&kafka.SubscriberConfig{Topics: []string{"t"}, DeadLetterTopic: "d"}, "Group"},
		"no dead letters":      {&kafka.SubscriberConfig{Topics: []string{"t"}, Group: "g"}, "DeadLetterTopic"},
		"dead is read":         {&kafka.SubscriberConfig{Topics: []string{"t"}, Group: "g", DeadLetterTopic: "t"}, "DeadLetterTopic"},
		"empty broker":         {valid(func(c *kafka.SubscriberConfig) { c.Brokers = []string{""} }), "Brokers"},
		"negative commit":      {valid(func(c *kafka.SubscriberConfig) { c.CommitTimeout = -time.Second }), "CommitTimeout"},
		"negative max":         {valid(func(c *kafka.SubscriberConfig) { c.MaxDeliveries = -1 }), "MaxDeliveries"},
		"negative shutdown":    {valid(func(c *kafka.SubscriberConfig) { c.ShutdownTimeout = -1 }), "ShutdownTimeout"},
		"negative concurrency": {valid(func(c *kafka.SubscriberConfig) { c.Concurrency = -1 }), "Concurrency"},
		"backoff min > max": {valid(func(c *kafka.SubscriberConfig) {
			c.Backoff = outbox.Backoff{Min: time.Second, Max: time.Millisecond}
		}), "Backoff"},
	} {
		_, err := kafka.NewSubscriber(in, nop, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewSubscriber(%+v) = %v, want an error naming %s", name, c.cfg, err, c.want)
		}
		if c.cfg != nil {
			if verr := c.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("%s: Validate = %v, NewSubscriber = %v", name, verr, err)
			}
		}
	}
	// Kafka handles a partition at a time: a Concurrency above 1 is
	// accepted and ignored (TestConcurrencyIgnored).
	if _, err := kafka.NewSubscriber(in, nop, valid(func(c *kafka.SubscriberConfig) { c.Concurrency = 8 })); err != nil {
		t.Errorf("Concurrency 8: %v", err)
	}
}

// valid is a valid config changed by f.
func valid(f func(*kafka.SubscriberConfig)) *kafka.SubscriberConfig {
	c := &kafka.SubscriberConfig{Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d"}
	f(c)
	return c
}

func TestSubscriberConfigDefaults(t *testing.T) {
	c := (&kafka.SubscriberConfig{Topics: []string{"t"}, Group: "g", DeadLetterTopic: "d"}).WithDefaults()
	if len(c.Brokers) != 1 || c.Brokers[0] != kafka.DefaultBroker || c.ClientID != kafka.DefaultClientID ||
		c.CommitTimeout != kafka.DefaultCommitTimeout || c.MaxDeliveries != subscribers.DefaultMaxDeliveries ||
		c.Backoff != subscribers.DefaultBackoff || c.ShutdownTimeout != subscribers.DefaultShutdownTimeout || c.Logger == nil {
		t.Fatalf("WithDefaults = %+v", c)
	}
	var none *kafka.SubscriberConfig
	if c := none.WithDefaults(); c.CommitTimeout != kafka.DefaultCommitTimeout || c.MaxDeliveries != subscribers.DefaultMaxDeliveries {
		t.Fatalf("nil WithDefaults = %+v", c)
	}
}

// TestConcurrencyIgnored: Options.Concurrency does not make the subscriber
// handle the records of a partition at once: with 4 asked for, the records
// of a one-partition topic, each of its own key, are handled one at a
// time, in order.
func TestConcurrencyIgnored(t *testing.T) {
	pool := pgtest.Pool(t)
	db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := db.Inbox().Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "c.orders", "c.dead"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	msgs := make([]outbox.Message, 20)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprintf("k%d", i), Payload: []byte("x")}
	}
	p := newPublisher(t, &kafka.PublisherConfig{Brokers: c.ListenAddrs(), TopicPrefix: "c."})
	defer p.Close()
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}

	var (
		inside, most atomic.Int32
		mu           sync.Mutex
		order        []uuid.UUID
		acks         = make(chan struct{}, len(msgs))
	)
	h := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		n := inside.Add(1)
		defer inside.Add(-1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		mu.Lock()
		order = append(order, m.ID)
		mu.Unlock()
		return nil
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kafka.NewSubscriber(in, h, &kafka.SubscriberConfig{
		Options: subscribers.Options{Concurrency: 4, Hooks: subscribers.Hooks{AfterSettle: func(st subscribers.Settlement) {
			if st.Action == subscribers.ActionAck {
				acks <- struct{}{}
			}
		}}},
		Brokers: c.ListenAddrs(), Topics: []string{"c.orders"}, TopicPrefix: "c.", Group: "g", DeadLetterTopic: "c.dead",
		ClientOptions: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		select {
		case <-acks:
		case <-ctx.Done():
			t.Fatalf("%d acks of %d: %v", i, len(msgs), ctx.Err())
		}
	}
	if err := sub.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d handlers ran at once, want 1", m)
	}
	for i, id := range order {
		if id != msgs[i].ID {
			t.Fatalf("handled %d-th: %s, want %s (published %d-th)", i, id, msgs[i].ID, i)
		}
	}
}
