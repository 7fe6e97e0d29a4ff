package rabbitmq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/rabbitmq"
	"github.com/outboxgo/outbox/subscribers"
)

// The publisher's side: publish to an exchange with publisher confirms,
// then read the message back from a queue bound to it, as a consumer
// would.
func ExampleNewPublisher() {
	ctx := context.Background()
	const url = "amqp://guest:guest@127.0.0.1:5672/"

	// The topology is the application's: an exchange, and a queue bound to
	// it for the topic "orders" (both gone when the example's connection
	// closes).
	conn, err := amqp.Dial(url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		log.Fatal(err)
	}
	if err := ch.ExchangeDeclare("example-events", amqp.ExchangeDirect, false, true, false, false, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := ch.QueueDeclare("example-orders", false, false, true, false, nil); err != nil {
		log.Fatal(err)
	}
	if err := ch.QueueBind("example-orders", "orders", "example-events", false, nil); err != nil {
		log.Fatal(err)
	}

	pub, err := rabbitmq.NewPublisher(&rabbitmq.PublisherConfig{URL: url, Exchange: "example-events"})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`)}}
	for i, err := range pub.Publish(ctx, msgs) { // one error per message: nil once the broker confirmed it
		if err != nil {
			log.Fatalf("message %d: %v", i, err)
		}
	}

	d, ok, err := ch.Get("example-orders", true)
	if err != nil || !ok {
		log.Fatal("no message: ", err)
	}
	m, err := rabbitmq.Decode(d, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("routing key:", d.RoutingKey)
	fmt.Println("same ID:", m.ID == msgs[0].ID)
	fmt.Println(m.Topic, m.Key, m.Type, string(m.Payload))
	// Output:
	// routing key: orders
	// same ID: true
	// orders order-42 order.placed {"total":42}
}

// A relay configured by URL: the exchange, a routing key prefix and the
// timeouts are query parameters. A parameter ConfigFromURL does not know is
// an error, and errors never show the password.
func ExampleConfigFromURL() {
	cfg, err := rabbitmq.ConfigFromURL("amqp://relay:s3cret@rabbit.internal:5672/prod?exchange=events&routing_key_prefix=outbox.&confirm_timeout=10s&heartbeat=30")
	if err != nil {
		log.Fatal(err)
	}
	// heartbeat is amqp091's: it stays in cfg.URL, the others are taken out.
	fmt.Println(cfg.Exchange, cfg.RoutingKey("orders"), cfg.ConfirmTimeout)

	_, err = rabbitmq.ConfigFromURL("amqp://relay:s3cret@rabbit.internal:5672/prod?exchnage=events")
	fmt.Println(err)
	// Output:
	// events outbox.orders 10s
	// rabbitmq publisher: URL amqp://relay:xxxxx@rabbit.internal:5672/prod?exchnage=events: unknown parameter "exchnage" (known: exchange, routing_key_prefix, confirm_timeout, dial_timeout, connection_timeout, max_message_size, connection_name, heartbeat, channel_max, auth_mechanism, cacertfile, certfile, keyfile, server_name_indication)
}

// The consumer's side: a subscriber feeds an inbox in PostgreSQL from a
// queue. The handler's effect and the message's inbox record commit in one
// transaction, and only then is the message acknowledged, so a message
// delivered twice has one effect.
func ExampleNewSubscriber() {
	ctx := context.Background()
	const url = "amqp://guest:guest@127.0.0.1:5672/"

	// The inbox: a table in PostgreSQL, and the handler's own table next to it.
	pool, schema, done := pgtest.ExampleDB()
	defer done()
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Inbox().Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+schema+".paid (order_key text)"); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		log.Fatal(err)
	}
	pay := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+schema+".paid (order_key) VALUES ($1)", m.Key)
		return err
	}

	settled := make(chan subscribers.Settlement, 2)
	sub, err := rabbitmq.NewSubscriber(in, pay, &rabbitmq.SubscriberConfig{
		URL:   url,
		Queue: "example-billing",
		// A queue of its own for the messages that fail for good.
		DeadLetterRoutingKey: "example-billing-dead",
		// Setup runs on every connection: the topology comes back after a
		// broker restart. x-expires: RabbitMQ deletes an unused queue.
		Setup: func(ch *amqp.Channel) error {
			for _, q := range []string{"example-billing", "example-billing-dead"} {
				if _, err := ch.QueueDeclare(q, true, false, false, false, amqp.Table{"x-expires": int32(60000)}); err != nil {
					return err
				}
			}
			return nil
		},
		Options: subscribers.Options{
			MaxDeliveries: 5,
			Hooks:         subscribers.Hooks{AfterSettle: func(st subscribers.Settlement) { settled <- st }},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer sub.Stop(ctx)

	// The same event twice, through the default exchange: the routing key
	// (the topic) names the queue.
	pub, err := rabbitmq.NewPublisher(&rabbitmq.PublisherConfig{URL: url})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	m := outbox.Message{ID: outbox.NewID(), Topic: "example-billing", Key: "order-42", Payload: []byte(`{"total":42}`)}
	for _, err := range pub.Publish(ctx, []outbox.Message{m, m}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	for range 2 {
		select {
		case st := <-settled:
			fmt.Println(st.Source, st.Action, st.Outcome)
		case <-time.After(30 * time.Second):
			log.Fatal("no settlement")
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".paid").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("effects:", n)
	// Output:
	// example-billing ack handled
	// example-billing ack duplicate
	// effects: 1
}
