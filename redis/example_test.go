package redis_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/redis"
	"github.com/outboxgo/outbox/subscribers"
)

// The publisher's side: append a message to the stream of its topic, then
// read the entry back as a consumer would.
func ExampleNewPublisher() {
	ctx := context.Background()
	prefix := fmt.Sprintf("example-%d:", os.Getpid()) // streams of the example's own
	pub, err := redis.NewPublisher(&redis.PublisherConfig{URL: "redis://127.0.0.1:6379/0", StreamPrefix: prefix})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	rdb := pub.Client() // the publisher's own client, closed with it
	defer rdb.Del(ctx, prefix+"orders")

	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`), Headers: map[string]string{"trace": "t-1"}}}
	for i, err := range pub.Publish(ctx, msgs) { // one error per message: nil once Redis appended it
		if err != nil {
			log.Fatalf("message %d: %v", i, err)
		}
	}

	entries, err := rdb.XRange(ctx, prefix+"orders", "-", "+").Result()
	if err != nil {
		log.Fatal(err)
	}
	m, err := redis.Decode(prefix+"orders", entries[0], prefix, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("entries:", len(entries))
	fmt.Println("same ID:", m.ID == msgs[0].ID)
	fmt.Println(m.Topic, m.Key, m.Type, string(m.Payload), m.Headers["trace"])
	// Output:
	// entries: 1
	// same ID: true
	// orders order-42 order.placed {"total":42} t-1
}

// A relay configured by URL: the publisher's settings are query
// parameters, go-redis's connection options (dial_timeout, …) stay in the
// URL for the client. A parameter neither knows is an error, and errors
// never show the password.
func ExampleConfigFromURL() {
	cfg, err := redis.ConfigFromURL("redis://relay:s3cret@redis.internal:6379/2?stream_prefix=events:&maxlen=100000&dial_timeout=2s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.StreamPrefix, cfg.MaxLen)

	_, err = redis.ConfigFromURL("redis://relay:s3cret@redis.internal:6379/2?stream_prefx=events:")
	fmt.Println(err)
	// Output:
	// events: 100000
	// redis publisher: URL redis://relay:xxxxx@redis.internal:6379/2?stream_prefx=events:: unknown parameter "stream_prefx" (the publisher reads stream_prefix, maxlen, max_payload and key_runs; go-redis its connection options, see redis.ParseURL)
}

// The consumer's side: a Subscriber reads the stream through a consumer
// group into an inbox in PostgreSQL, which runs the handler once per event:
// the same event appended twice is handled once, the second time a
// duplicate.
func ExampleNewSubscriber() {
	ctx := context.Background()
	prefix := fmt.Sprintf("example-sub-%d:", os.Getpid()) // streams of the example's own
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	defer rdb.Del(ctx, prefix+"orders", prefix+"dead")

	// The inbox: a table in a schema of the example's own.
	pool, schema, done := pgtest.ExampleDB()
	defer done()
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Inbox().Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		log.Fatal(err)
	}

	// An event, published twice (a relay that died between Redis's reply
	// and marking the event published publishes it again).
	pub, err := redis.NewPublisher(&redis.PublisherConfig{Client: rdb, StreamPrefix: prefix})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close() // leaves rdb open: it is the caller's
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Payload: []byte(`{"total":42}`)}
	for _, err := range pub.Publish(ctx, []outbox.Message{msg, msg}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	settled := make(chan inbox.Outcome, 2)
	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		// The business change goes in tx, with the inbox's record of m.ID.
		fmt.Printf("handling %s %s from %s\n", m.Key, m.Payload, m.Topic)
		return nil
	}
	sub, err := redis.NewSubscriber(rdb, in, handler, &redis.SubscriberConfig{
		Streams: []string{prefix + "orders"}, StreamPrefix: prefix,
		Group: "billing", DeadLetterStream: prefix + "dead",
		Options: subscribers.Options{Hooks: subscribers.Hooks{
			AfterCommit: func(_ inbox.Message, o inbox.Outcome) { settled <- o },
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer sub.Stop(ctx)
	for range 2 {
		select {
		case o := <-settled:
			fmt.Println(o)
		case <-time.After(30 * time.Second):
			log.Fatal("not handled within 30s")
		}
	}
	// Output:
	// handling order-42 {"total":42} from orders
	// handled
	// duplicate
}
