package rabbitmq_test

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/rabbitmq"
)

func TestDecode(t *testing.T) {
	const id = "01a2294e-107b-793a-a5e8-0ea39d482a41"
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := amqp.Delivery{MessageId: id, Type: "T", RoutingKey: "q", Exchange: "", Timestamp: ts, Body: []byte("p"),
		Headers: amqp.Table{"Outbox-Key": "k", "x-outbox-deliveries": int32(2), "x-delivery-count": int64(1),
			"x-outbox-routing-key": "ev.orders", "x-outbox-exchange": "ex", "a": "b", "n": int32(7)}}
	m, err := rabbitmq.Decode(d, "ev.")
	if err != nil || m.ID.String() != id || m.Topic != "orders" || m.Key != "k" || m.Type != "T" || string(m.Payload) != "p" ||
		!m.CreatedAt.Equal(ts) || len(m.Headers) != 1 || m.Headers["a"] != "b" || m.Delivery != 4 {
		t.Fatalf("Decode = %+v, %v", m, err)
	}
	if n := rabbitmq.Deliveries(amqp.Delivery{}); n != 1 {
		t.Fatalf("Deliveries of a first delivery = %d", n)
	}
	for name, d := range map[string]amqp.Delivery{
		"no id":       {},
		"bad id":      {MessageId: "nope"},
		"bad created": {MessageId: id, Headers: amqp.Table{"Outbox-Created-At": "yesterday"}},
	} {
		if _, err := rabbitmq.Decode(d, ""); !inbox.IsPermanent(err) {
			t.Errorf("%s: Decode error %v, want a permanent one", name, err)
		}
	}
}
