package sqs_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/sqs"
	"github.com/outboxgo/outbox/subscribers"
)

// The publisher's side: send a message to the queue of its topic, then
// receive it as any SQS consumer would. The example runs against the
// package's test server; against SQS, leave Endpoint out and let the
// SDK's default chain find the credentials.
func ExampleNewPublisher() {
	ctx := context.Background()
	fake := sqsfake.New(sqsfake.Options{})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.CreateQueue("example-orders")

	pub, err := sqs.NewPublisher(ctx, &sqs.PublisherConfig{Region: "eu-west-1", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example", ""), QueuePrefix: "example-"})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`), Headers: map[string]string{"trace": "t-1"}}}
	for i, err := range pub.Publish(ctx, msgs) { // one error per message: nil once SQS stored it
		if err != nil {
			log.Fatalf("message %d: %v", i, err)
		}
	}

	out, err := pub.Client().ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl: aws.String(srv.URL + "/" + sqsfake.Account + "/example-orders"), MessageAttributeNames: []string{"All"}})
	if err != nil {
		log.Fatal(err)
	}
	m := out.Messages[0]
	got, err := sqs.Decode("orders", aws.ToString(m.Body), m.MessageAttributes, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same ID:", got.ID == msgs[0].ID)
	fmt.Println(aws.ToString(m.MessageAttributes[sqs.AttrKey].StringValue), aws.ToString(m.MessageAttributes["trace"].StringValue))
	fmt.Println(got.Topic, got.Key, got.Type, string(got.Payload), got.Headers["trace"])
	// Output:
	// same ID: true
	// order-42 t-1
	// orders order-42 order.placed {"total":42} t-1
}

// A relay configured by URL: region (and account) in the host, the queue
// prefix in the path, settings in the query; no credentials, which come
// from the SDK's default chain. An unknown parameter is an error.
func ExampleConfigFromURL() {
	cfg, err := sqs.ConfigFromURL("sqs://123456789012.eu-west-1/orders-?fifo=true&check_topics=placed,paid")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Account, cfg.Region, cfg.QueuePrefix, cfg.FIFO, cfg.CheckTopics)

	_, err = sqs.ConfigFromURL("sqs://eu-west-1/orders-?fifo=true&max_sise=1000")
	fmt.Println(err)
	// Output:
	// 123456789012 eu-west-1 orders- true [placed paid]
	// sqs publisher: URL sqs://eu-west-1/orders-?fifo=true&max_sise=1000: unknown parameter "max_sise" (the publisher reads endpoint, fifo, max_size, max_in_flight, max_attempts, check_topics)
}

// The consumer's side: a Subscriber long-polls the queue into an inbox in
// PostgreSQL, which runs the handler once per event: the same event sent
// twice (to a standard queue) is handled once, the second time a
// duplicate.
func ExampleNewSubscriber() {
	ctx := context.Background()
	fake := sqsfake.New(sqsfake.Options{})
	srv := httptest.NewServer(fake)
	defer srv.Close()
	fake.CreateQueue("example-orders")
	fake.CreateQueue("example-dead")
	client, closeIdle, err := sqs.NewClient(ctx, sqs.ClientOptions{Region: "eu-west-1", Endpoint: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "example", "")})
	if err != nil {
		log.Fatal(err)
	}
	defer closeIdle()

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

	pub, err := sqs.NewPublisher(ctx, &sqs.PublisherConfig{Client: client, QueuePrefix: "example-"})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Payload: []byte(`{"total":42}`)}
	for range 2 { // a relay that died before marking the event published sends it again
		for _, err := range pub.Publish(ctx, []outbox.Message{msg}) {
			if err != nil {
				log.Fatal(err)
			}
		}
	}

	settled := make(chan inbox.Outcome, 2)
	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		fmt.Printf("handling %s %s from %s\n", m.Key, m.Payload, m.Topic)
		return nil
	}
	sub, err := sqs.NewSubscriber(client, in, handler, &sqs.SubscriberConfig{
		Queue: "example-orders", QueuePrefix: "example-", DeadLetterQueue: "example-dead",
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
