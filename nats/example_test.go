package nats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/subscribers"
)

// The relay's side: a publisher whose topics go on subjects shop.<topic>,
// captured by a stream of its own that SetupStream creates. JetStream
// acknowledges a message once the stream stored it.
func ExampleNewPublisher() {
	ctx := context.Background()
	prefix, stream := exampleNames() // "shop_…", "SHOP_…": names no other run uses

	pub, err := nats.NewPublisher(&nats.PublisherConfig{
		URL:           "nats://127.0.0.1:4222",
		SubjectPrefix: prefix,
		Stream:        stream,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.SetupStream(ctx); err != nil {
		log.Fatal(err)
	}
	defer deleteStreams(pub, stream)

	// The relay calls Publish with a batch it claimed; one error per
	// message.
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "OrderPlaced",
		Payload: []byte(`{"id":42}`), CreatedAt: time.Now()}
	for _, err := range pub.Publish(ctx, []outbox.Message{msg}) {
		fmt.Println("published:", err)
	}

	js, err := jetstream.New(pub.Conn())
	if err != nil {
		log.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		log.Fatal(err)
	}
	stored, err := s.GetLastMsgForSubject(ctx, prefix+".orders")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("key:", stored.Header.Get(nats.HeaderKey), "type:", stored.Header.Get(nats.HeaderType))
	fmt.Println("payload:", string(stored.Data))
	fmt.Println("dedup ID is the event ID:", stored.Header.Get(nats.HeaderMsgID) == msg.ID.String())
	// Output:
	// published: <nil>
	// key: order-42 type: OrderPlaced
	// payload: {"id":42}
	// dedup ID is the event ID: true
}

// The consumer's side: a durable consumer of the stream feeds an inbox in
// PostgreSQL. The handler's writes go in tx, the transaction that records
// the message in the inbox; the message is acknowledged only once it
// committed, and a redelivery of it is dropped as a duplicate.
func ExampleNewSubscriber() {
	ctx := context.Background()
	prefix, stream := exampleNames()
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

	// A publisher to the stream, and a stream for the dead letters.
	pub, err := nats.NewPublisher(&nats.PublisherConfig{SubjectPrefix: prefix, Stream: stream})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	if err := pub.SetupStream(ctx); err != nil {
		log.Fatal(err)
	}
	if err := pub.EnsureStream(ctx, stream+"_DEAD", []string{prefix + "_dead.>"}); err != nil {
		log.Fatal(err)
	}
	defer deleteStreams(pub, stream, stream+"_DEAD")

	js, err := jetstream.New(pub.Conn()) // a subscriber may share the connection, or have its own
	if err != nil {
		log.Fatal(err)
	}
	committed := make(chan string, 1)
	handler := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		// Write the message's effect with tx here.
		return nil
	}
	sub, err := nats.NewSubscriber(js, in, handler, &nats.SubscriberConfig{
		Stream:            stream,
		Durable:           "billing",
		SubjectPrefix:     prefix,
		DeadLetterSubject: prefix + "_dead.billing",
		Options: subscribers.Options{
			MaxDeliveries: 3,
			Hooks: subscribers.Hooks{AfterCommit: func(m inbox.Message, o inbox.Outcome) {
				select {
				case committed <- fmt.Sprintf("%s %s %s: %v", m.Topic, m.Type, m.Payload, o):
				default: // a redelivery, after the first
				}
			}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = sub.Stop(ctx) }()

	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Type: "OrderPlaced", Payload: []byte(`{"id":42}`)}
	if err := pub.Publish(ctx, []outbox.Message{msg})[0]; err != nil {
		log.Fatal(err)
	}
	select {
	case s := <-committed:
		fmt.Println(s)
	case <-time.After(30 * time.Second):
		log.Fatal("not handled within 30s")
	}
	// Output:
	// orders OrderPlaced {"id":42}: handled
}

// A nats:// URL carries every publisher setting as a query parameter (the
// outbox CLI's --broker-url); errors name the URL with its secrets hidden.
func ExampleConfigFromURL() {
	cfg, err := nats.ConfigFromURL("nats://s3cret-token@127.0.0.1:4222?subject_prefix=shop&stream=SHOP&ack_timeout=10s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.SubjectPrefix, cfg.Stream, cfg.AckTimeout)

	_, err = nats.ConfigFromURL("nats://s3cret-token@127.0.0.1:4222?stream_name=SHOP")
	fmt.Println(err)
	// Output:
	// shop SHOP 10s
	// nats publisher: URL nats://xxxxx@127.0.0.1:4222?stream_name=SHOP: unknown parameter "stream_name" (known: subject_prefix, stream, name, max_pending, ack_timeout, connect_timeout, reconnect_wait, atomic_key_runs, fast_key_runs, token)
}

// exampleNames returns a subject prefix and a stream name no other run
// uses.
func exampleNames() (prefix, stream string) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	return "shop_" + suffix, "SHOP_" + suffix
}

// deleteStreams deletes the example's streams.
func deleteStreams(pub *nats.Publisher, names ...string) {
	js, err := jetstream.New(pub.Conn())
	if err != nil {
		log.Fatal(err)
	}
	for _, n := range names {
		if err := js.DeleteStream(context.Background(), n); err != nil {
			log.Printf("delete stream %s: %v", n, err)
		}
	}
}
