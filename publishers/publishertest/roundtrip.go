package publishertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
)

// testRoundTrip: ID, key, type, headers and payload arrive intact.
func testRoundTrip(t *testing.T, env Env) {
	p := open(t, env)
	now := time.Now().UTC()
	msgs := []outbox.Message{{
		ID: outbox.NewID(), Topic: env.Topic, Key: "order-1", Type: "OrderConfirmed",
		Payload:   []byte(`{"order":1}`),
		Headers:   map[string]string{"correlation-id": "c-1", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		CreatedAt: now,
	}, {
		ID: outbox.NewID(), Topic: env.Topic, // no key, type, headers or payload
		CreatedAt: now,
	}, {
		ID: outbox.NewID(), Topic: env.Topic, Key: "clé ☃", Type: "Bytes",
		Payload:   []byte{0, 1, 2, 0xff, 0xfe, '\r', '\n', 0},
		Headers:   map[string]string{"unicode": "žluťoučký kůň ☃", "empty": ""},
		CreatedAt: now,
	}}
	publishOK(t, p, msgs)
	got := read(t, env, len(msgs))
	byID := make(map[string]Received, len(got))
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, m := range msgs {
		r, ok := byID[m.ID.String()]
		if !ok {
			t.Errorf("message %s did not arrive; got %v", m.ID, receivedIDs(got))
			continue
		}
		if r.Key != m.Key || r.Type != m.Type {
			t.Errorf("message %s: key %q type %q, want %q %q", m.ID, r.Key, r.Type, m.Key, m.Type)
		}
		if !bytes.Equal(r.Payload, m.Payload) {
			t.Errorf("message %s: payload %q, want %q", m.ID, r.Payload, m.Payload)
		}
		for k, v := range m.Headers {
			if got, ok := r.Headers[k]; !ok || got != v {
				t.Errorf("message %s: header %q = %q (present %v), want %q", m.ID, k, got, ok, v)
			}
		}
		if r.Topic != "" && r.Topic != m.Topic {
			t.Errorf("message %s: topic %q, want %q", m.ID, r.Topic, m.Topic)
		}
	}
}

// testEmptyBatch: nothing to publish is no error.
func testEmptyBatch(t *testing.T, env Env) {
	p := open(t, env)
	if errs := p.Publish(context.Background(), nil); len(errs) != 0 {
		t.Fatalf("Publish(nil) = %v, want no results", errs)
	}
}
