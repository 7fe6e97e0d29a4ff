package redis_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/redis"
)

func TestDecode(t *testing.T) {
	const id = "01a2294e-107b-793a-a5e8-0ea39d482a41"
	m, err := redis.Decode("ev:orders", goredis.XMessage{ID: "1-0", Values: map[string]any{
		"id": id, "key": "k", "type": "T", "payload": "p", "created_at": "2026-01-02T03:04:05.5Z", "headers": `{"a":"b"}`,
	}}, "ev:", 2)
	if err != nil || m.ID.String() != id || m.Topic != "orders" || m.Key != "k" || m.Type != "T" || string(m.Payload) != "p" ||
		m.CreatedAt.Nanosecond() != 5e8 || m.Headers["a"] != "b" || m.Delivery != 2 {
		t.Fatalf("Decode = %+v, %v", m, err)
	}
	m, err = redis.Decode("s", goredis.XMessage{Values: map[string]any{"id": id, "headers": "{}"}}, "", 1)
	if err != nil || m.Headers != nil || !m.CreatedAt.IsZero() {
		t.Fatalf("Decode of a bare entry = %+v, %v", m, err)
	}
	for name, vals := range map[string]map[string]any{
		"no id":       {"payload": "x"},
		"bad id":      {"id": "nope"},
		"bad created": {"id": id, "created_at": "yesterday"},
		"bad headers": {"id": id, "headers": "[1]"},
	} {
		if _, err := redis.Decode("s", goredis.XMessage{ID: "1-0", Values: vals}, "", 1); !inbox.IsPermanent(err) {
			t.Errorf("%s: Decode error %v, want a permanent one", name, err)
		}
	}
}
