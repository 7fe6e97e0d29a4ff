package kafka_test

import (
	"context"
	"fmt"
	"log"
	"time"

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

// A Publisher produces each message to the Kafka topic TopicPrefix +
// topic, keyed by the message's key, with the event ID in the Outbox-Id
// header. (The relay calls Publish; here the example does.) The cluster is
// franz-go's in-process kfake.
func ExamplePublisher() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events.orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pub, err := kafka.NewPublisher(&kafka.PublisherConfig{Brokers: cluster.ListenAddrs(), TopicPrefix: "events."})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.created",
		Payload: []byte(`{"id":42}`)}
	for _, err := range pub.Publish(ctx, []outbox.Message{msg}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	// Read it back with a plain consumer.
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("events.orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	r := cl.PollRecords(ctx, 1).Records()[0]
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	fmt.Printf("%s key=%s %s\n", r.Topic, r.Key, r.Value)
	fmt.Println("type:", headers[kafka.HeaderType])
	fmt.Println("event ID:", headers[kafka.HeaderID] == msg.ID.String())
	// Output:
	// events.orders key=order-42 {"id":42}
	// type: order.created
	// event ID: true
}

// ConfigFromURL reads a kafka:// URL, as the outbox command does; an
// unknown parameter is an error that names it, and never shows the
// password.
func ExampleConfigFromURL() {
	cfg, err := kafka.ConfigFromURL("kafka://b1:9092,b2?topic_prefix=events.&delivery_timeout=10s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Brokers, cfg.TopicPrefix, cfg.DeliveryTimeout)

	_, err = kafka.ConfigFromURL("kafka+tls://relay:s3cret@b1?topic_prefx=events.")
	fmt.Println(err)
	// Output:
	// [b1:9092 b2:9092] events. 10s
	// kafka publisher: URL kafka+tls://relay:xxxxx@b1?topic_prefx=events.: unknown parameter "topic_prefx"
}

// A Subscriber feeds an inbox from a consumer group: the handler's effect
// and the inbox record commit in one PostgreSQL transaction, and only then
// is the record's offset committed. A record whose event ID the inbox
// holds already is committed without running the handler.
func ExampleNewSubscriber() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events.orders", "billing.dead"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The inbox table, in a schema of the example's own.
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

	// The same event, published twice (a relay that died before marking it).
	pub, err := kafka.NewPublisher(&kafka.PublisherConfig{Brokers: cluster.ListenAddrs(), TopicPrefix: "events."})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.created", Payload: []byte(`{"id":42}`)}
	for _, err := range pub.Publish(ctx, []outbox.Message{msg, msg}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	settled := make(chan subscribers.Settlement)
	handle := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		// The effect goes in tx, with the inbox record.
		fmt.Printf("handled %s %s %s\n", m.Topic, m.Type, m.Payload)
		return nil
	}
	sub, err := kafka.NewSubscriber(in, handle, &kafka.SubscriberConfig{
		Options: subscribers.Options{Hooks: subscribers.Hooks{AfterSettle: func(st subscribers.Settlement) { settled <- st }}},
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"events.orders"}, TopicPrefix: "events.",
		Group: "billing", DeadLetterTopic: "billing.dead",
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		select {
		case st := <-settled:
			fmt.Println(st.Action, st.Outcome)
		case <-ctx.Done():
			log.Fatal(ctx.Err())
		}
	}
	if err := sub.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// handled orders order.created {"id":42}
	// ack handled
	// ack duplicate
}
