package pubsub_test

import (
	"context"
	"fmt"
	"log"
	"os"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/pubsub"
)

// The publisher's side on the emulator (PUBSUB_EMULATOR_HOST): publish an
// event to the topic of its outbox topic, then receive it back as a
// consumer would and decode it.
func ExampleNewPublisher() {
	ctx := context.Background()
	project := fmt.Sprintf("example-%d", os.Getpid()) // a project of the example's own
	cfg, err := pubsub.ConfigFromURL("pubsub://" + project + "?topic_prefix=shop-")
	if err != nil {
		log.Fatal(err)
	}
	pub, err := pubsub.NewPublisher(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()

	// The topic and an ordering subscription, made as an operator would.
	admin := pub.Client()
	topic := "projects/" + project + "/topics/" + pub.TopicID("orders")
	sub := "projects/" + project + "/subscriptions/shop-orders-reader"
	if _, err := admin.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: topic}); err != nil {
		log.Fatal(err)
	}
	defer admin.TopicAdminClient.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: topic}) //nolint:errcheck // cleanup
	if _, err := admin.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{Name: sub, Topic: topic, EnableMessageOrdering: true}); err != nil {
		log.Fatal(err)
	}
	defer admin.SubscriptionAdminClient.DeleteSubscription(ctx, &pb.DeleteSubscriptionRequest{Subscription: sub}) //nolint:errcheck // cleanup

	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`), Headers: map[string]string{"trace": "t-1"}}}
	for i, err := range pub.Publish(ctx, msgs) { // one error per message: nil once Pub/Sub stored it
		if err != nil {
			log.Fatalf("message %d: %v", i, err)
		}
	}

	rctx, cancel := context.WithCancel(ctx)
	var got *gpubsub.Message
	err = admin.Subscriber(sub).Receive(rctx, func(_ context.Context, m *gpubsub.Message) {
		got = m
		m.Ack()
		cancel()
	})
	if err != nil {
		log.Fatal(err)
	}
	m, err := pubsub.Decode(got, "", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ordering key:", got.OrderingKey)
	fmt.Println("same ID:", m.ID == msgs[0].ID)
	fmt.Println(m.Topic, m.Key, m.Type, string(m.Payload), m.Headers["trace"])
	// Output:
	// ordering key: order-42
	// same ID: true
	// orders order-42 order.placed {"total":42} t-1
}
