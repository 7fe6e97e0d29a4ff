package metrics_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/subscribers"
)

// A NATS subscriber feeding an inbox in PostgreSQL: each settlement is
// counted by action, and a redelivery of a handled message by the inbox
// as a duplicate.
func TestSubscriberSettlements(t *testing.T) {
	b := setup(t, nil, nil)
	srv := natstest.StartServer(t, "")
	ctx := context.Background()
	pub := natsPublisher(t, natspub.PublisherConfig{URL: srv.URL(), SubjectPrefix: "shop", Stream: "SHOP"})
	if err := pub.SetupStream(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pub.EnsureStream(ctx, "SHOP_DEAD", []string{"shop_dead.>"}); err != nil {
		t.Fatal(err)
	}
	in, err := inbox.New(b.db.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, srv.Connect(t))
	handler := func(_ context.Context, _ pgx.Tx, m inbox.Message) error {
		switch {
		case m.Topic == "flaky" && m.Delivery == 1:
			return errors.New("not yet")
		case m.Topic == "bad":
			return inbox.Permanent(errors.New("cannot parse"))
		}
		return nil
	}
	var hooked atomic.Int64 // the program's own hook, chained
	sub, err := natspub.NewSubscriber(js, in, handler, &natspub.SubscriberConfig{
		Stream: "SHOP", Durable: "billing", SubjectPrefix: "shop", DeadLetterSubject: "shop_dead.billing",
		Options: subscribers.Options{
			MaxDeliveries: 3,
			Backoff:       outbox.Backoff{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond},
			Hooks:         b.m.SubscriberHooks(subscribers.Hooks{AfterSettle: func(subscribers.Settlement) { hooked.Add(1) }}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sub.Stop(sctx); err != nil {
			t.Errorf("stop subscriber: %v", err)
		}
	})

	// "dup" was handled before: an earlier delivery, say, whose ack was lost.
	dup := outbox.Message{ID: outbox.NewID(), Topic: "dup", Payload: []byte(`{}`), CreatedAt: time.Now()}
	if _, err := in.Handle(ctx, inbox.Message{ID: dup.ID, Topic: "dup"}, func(context.Context, pgx.Tx, inbox.Message) error { return nil }); err != nil {
		t.Fatal(err)
	}
	msgs := []outbox.Message{dup}
	for _, topic := range []string{"ok", "flaky", "bad"} {
		msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: topic, Payload: []byte(`{}`), CreatedAt: time.Now()})
	}
	for i, err := range pub.Publish(ctx, msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		topic, action string
		want          float64
	}{{"ok", "ack", 1}, {"flaky", "retry", 1}, {"flaky", "ack", 1}, {"bad", "dead-letter", 1}, {"dup", "ack", 1}} {
		waitValue(t, b.reg, c.want, "outbox_subscriber_deliveries_total", "topic", c.topic, "action", c.action)
	}
	if v, _ := value(t, b.reg, "outbox_inbox_duplicates_total", "topic", "dup"); v != 1 {
		t.Errorf("outbox_inbox_duplicates_total{dup} = %v, want 1", v)
	}
	if v, _ := value(t, b.reg, "outbox_inbox_duplicates_total"); v != 1 {
		t.Errorf("outbox_inbox_duplicates_total = %v, want 1 (only dup)", v)
	}
	if total, _ := value(t, b.reg, "outbox_subscriber_deliveries_total"); total != 5 {
		t.Errorf("outbox_subscriber_deliveries_total = %v, want 5", total)
	}
	if n := hooked.Load(); n != 5 {
		t.Errorf("the chained AfterSettle ran %d times, want 5", n)
	}
}
