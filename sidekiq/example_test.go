package sidekiq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sidekiq"
)

// The relay's side: an event of the topic "orders" becomes a job of the
// class Billing::OrderJob on the queue "critical", which a Sidekiq worker
// runs as perform(payload, meta).
func ExampleNewPublisher() {
	ctx := context.Background()
	ns := fmt.Sprintf("example-%d", os.Getpid()) // a namespace of the example's own
	pub, err := sidekiq.NewPublisher(&sidekiq.PublisherConfig{
		URL: "redis://127.0.0.1:6379/0", Namespace: ns,
		Routes: map[string]sidekiq.Route{"orders": {Class: "Billing::OrderJob", Queue: "critical"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	rdb := pub.Client().(*goredis.Client) // the publisher's own client, closed with it
	defer rdb.Del(ctx, ns+":queues", ns+":queue:critical")

	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"total":42}`)}
	for _, err := range pub.Publish(ctx, []outbox.Message{msg}) {
		if err != nil {
			log.Fatal(err)
		}
	}

	raw, err := rdb.RPop(ctx, ns+":queue:critical").Result() // what Sidekiq's fetch takes
	if err != nil {
		log.Fatal(err)
	}
	var job struct {
		Class string            `json:"class"`
		Queue string            `json:"queue"`
		JID   string            `json:"jid"`
		Args  []json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		log.Fatal(err)
	}
	var meta sidekiq.Meta
	_ = json.Unmarshal(job.Args[1], &meta)
	fmt.Println(job.Class, job.Queue, job.JID == sidekiq.JID(msg.ID))
	fmt.Println(string(job.Args[0]), meta.Encoding, meta.Key, meta.Type, meta.ID == msg.ID.String())
	// Output:
	// Billing::OrderJob critical true
	// {"total":42} json order-42 order.placed true
}

// A relay configured by URL: the publisher's settings are query
// parameters, go-redis's connection options stay in the URL for the
// client. A parameter neither knows is an error, and errors never show
// the password.
func ExampleConfigFromURL() {
	cfg, err := sidekiq.ConfigFromURL("sidekiq://:s3cret@redis.internal:6379/0?namespace=app&class=OutboxEventJob&queue=events&dial_timeout=2s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Namespace, cfg.Class, cfg.Queue)

	_, err = sidekiq.ConfigFromURL("sidekiq://:s3cret@redis.internal:6379/0?klass=OutboxEventJob")
	fmt.Println(err)
	// Output:
	// app OutboxEventJob events
	// sidekiq publisher: URL sidekiq://:xxxxx@redis.internal:6379/0?klass=OutboxEventJob: unknown parameter "klass" (the publisher reads namespace, class, queue, retry, max_payload; go-redis its connection options, see redis.ParseURL)
}
