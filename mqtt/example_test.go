package mqtt_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/mqtt"
)

// The publisher's side: publish a message to the MQTT topic of its topic,
// and read it back as a consumer would, with a plain paho subscriber and
// Decode.
func ExampleNewPublisher() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("example/%d/", os.Getpid()) // topics of the example's own

	// A consumer, subscribed first: MQTT hands a message to the
	// subscriptions that exist when it arrives.
	got := make(chan *paho.Publish, 1)
	nc, err := net.Dial("tcp", "127.0.0.1:1883")
	if err != nil {
		log.Fatal(err)
	}
	sub := paho.NewClient(paho.ClientConfig{Conn: nc, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) { got <- pr.Packet; return true, nil }}})
	if _, err := sub.Connect(ctx, &paho.Connect{ClientID: prefix + "consumer", CleanStart: true, KeepAlive: 30}); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = sub.Disconnect(&paho.Disconnect{}); <-sub.Done() }()
	if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: prefix + "#", QoS: 1}}}); err != nil {
		log.Fatal(err)
	}

	pub, err := mqtt.NewPublisher(&mqtt.PublisherConfig{URL: "mqtt://127.0.0.1:1883", TopicPrefix: prefix})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`), Headers: map[string]string{"trace": "t-1"}}}
	for i, err := range pub.Publish(ctx, msgs) { // one error per message: nil once the broker sent its PUBACK
		if err != nil {
			log.Fatalf("message %d: %v", i, err)
		}
	}

	m, err := mqtt.Decode(<-got, prefix, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same ID:", m.ID == msgs[0].ID)
	fmt.Println(m.Topic, m.Key, m.Type, string(m.Payload), m.Headers["trace"])
	// Output:
	// same ID: true
	// orders order-42 order.placed {"total":42} t-1
}

// A relay configured by URL: the credentials in the user information, the
// publisher's settings as query parameters.
func ExampleConfigFromURL() {
	cfg, err := mqtt.ConfigFromURL("mqtt://relay:secret@127.0.0.1:1883?topic_prefix=events/&client_id=relay-1&max_packet_size=1048576")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.URL, cfg.TopicPrefix, cfg.ClientID, cfg.MaxPacketSize, cfg.Retain)
	// Output:
	// mqtt://relay:secret@127.0.0.1:1883 events/ relay-1 1048576 false
}
