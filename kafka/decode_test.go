package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/kafka"
)

func TestDecode(t *testing.T) {
	const id = "01a2294e-107b-793a-a5e8-0ea39d482a41"
	h := func(kv ...string) []kgo.RecordHeader {
		var out []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			out = append(out, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return out
	}
	r := &kgo.Record{Topic: "ev.orders", Key: []byte("k"), Value: []byte("p"),
		Headers: h("Outbox-Id", id, "Outbox-Type", "T", "Outbox-Created-At", "2026-01-02T03:04:05.5Z", "a", "b")}
	m, err := kafka.Decode(r, "ev.", 2)
	if err != nil || m.ID.String() != id || m.Topic != "orders" || m.Key != "k" || m.Type != "T" || string(m.Payload) != "p" ||
		m.CreatedAt.Nanosecond() != 5e8 || len(m.Headers) != 1 || m.Headers["a"] != "b" || m.Delivery != 2 {
		t.Fatalf("Decode = %+v, %v", m, err)
	}
	for name, hs := range map[string][]kgo.RecordHeader{
		"no id":       h("a", "b"),
		"bad id":      h("Outbox-Id", "nope"),
		"bad created": h("Outbox-Id", id, "Outbox-Created-At", "yesterday"),
	} {
		if _, err := kafka.Decode(&kgo.Record{Headers: hs}, "", 1); !inbox.IsPermanent(err) {
			t.Errorf("%s: Decode error %v, want a permanent one", name, err)
		}
	}
}
