package pubsub_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/pubsub"
)

// msgs returns n messages of topic and key, payloads of size bytes.
func msgs(topic, key string, n, size int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: topic, Key: key, Type: "Test",
			Payload: bytes.Repeat([]byte{'a' + byte(i%26)}, size), CreatedAt: time.Now().UTC()}
	}
	return out
}

func ids(ms []outbox.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID.String()
	}
	return out
}

// firstSeen is ids in the order of their first arrival (a re-sent
// message arrives again, and the inbox drops the copy).
func firstSeen(got []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range got {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func publishCtx(t *testing.T, p publishers.Publisher, ms []outbox.Message, timeout time.Duration) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := p.Publish(ctx, ms)
	if len(errs) != len(ms) {
		t.Fatalf("Publish of %d returned %d results", len(ms), len(errs))
	}
	return errs
}

// TestKeyOrderThroughFailure: a key's publish fails (the emulator cut off
// while a batch of the key is in the client, so the client pauses the
// key); the relay's retry sends the key's failed head first, the
// publisher resumes the key, and the subscriber sees the key in order.
func TestKeyOrderThroughFailure(t *testing.T) {
	w := newWorld(t)
	name := w.createTopic(t, "order")
	c := w.collect(t, w.createSub(t, name, w.prefix+"sub", nil))
	px := tcpproxy.Start(t, emulatorHost())
	p := newPublisher(t, pubsub.PublisherConfig{Project: w.project, TopicPrefix: w.prefix,
		ClientOptions: []option.ClientOption{option.WithEndpoint(px.Addr)}, PublishTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = p.Close() })
	all := msgs("order", "k", 4, 10)
	if err := publishCtx(t, p, all[:1], 15*time.Second)[0]; err != nil {
		t.Fatalf("first message: %v", err)
	}

	px.Cut()
	for i, err := range publishCtx(t, p, all[1:3], time.Second) {
		if !publishers.IsUnavailable(err) {
			t.Fatalf("emulator cut off: message %d: %v, want Unavailable", i+1, err)
		}
	}
	px.Restore(t)

	// As the relay does: the failed head and what follows, until stored.
	pending := all[1:3]
	deadline := time.Now().Add(30 * time.Second)
	for len(pending) > 0 {
		errs := publishCtx(t, p, pending, 3*time.Second)
		var failed []outbox.Message
		for i, err := range errs {
			if err != nil {
				if publishers.IsPermanent(err) {
					t.Fatalf("retry: message %d Permanent: %v", i, err)
				}
				failed = append(failed, pending[i])
			}
		}
		if len(failed) > 0 && time.Now().After(deadline) {
			t.Fatalf("the key did not resume: %d messages still fail, e.g. %v", len(failed), errs[len(errs)-1])
		}
		pending = failed
	}
	if err := publishCtx(t, p, all[3:], 15*time.Second)[0]; err != nil {
		t.Fatalf("last message: %v", err)
	}
	got := c.waitDistinct(len(all), 15*time.Second)
	if len(firstSeen(attrIDs(got))) < len(all) {
		t.Fatalf("read %d distinct messages, want %d", len(firstSeen(attrIDs(got))), len(all))
	}
	if order := firstSeen(attrIDs(got)); !slices.Equal(order, ids(all)) {
		t.Errorf("subscriber saw the key in the order %v, want %v", order, ids(all))
	}
}

// TestKeepsKeyOrderWithinCall: with ordering on, a call's messages of a
// key go out in order, and once one fails, none after it of its key is
// stored (each fails): the promise of publishers.OrderKeeper. The second
// of four messages is refused (each of the first two fills a request of
// its own).
func TestKeepsKeyOrderWithinCall(t *testing.T) {
	f := newFake(t, "keep", func(req *pb.PublishRequest) error {
		for _, m := range req.Messages {
			if m.Attributes["fail"] != "" {
				return invalid("does not match the topic's schema")
			}
		}
		return nil
	})
	p := newPublisher(t, pubsub.PublisherConfig{Client: f.client})
	t.Cleanup(func() { _ = p.Close() })
	if !p.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder = false with ordering on")
	}
	batch := msgs("keep", "k", 4, 10)
	batch[0].Payload = make([]byte, 2<<20) // a request of its own
	batch[1].Payload = make([]byte, 2<<20)
	batch[1].Headers = map[string]string{"fail": "1"}
	other := msgs("keep", "other-key", 1, 10)[0]
	errs := publishCtx(t, p, append(slices.Clone(batch), other), 15*time.Second)
	if errs[0] != nil {
		t.Errorf("message 0: %v", errs[0])
	}
	if !publishers.IsPermanent(errs[1]) {
		t.Errorf("refused message 1: %v, want Permanent", errs[1])
	}
	for i := 2; i < 4; i++ {
		if errs[i] == nil || publishers.IsPermanent(errs[i]) || publishers.IsUnavailable(errs[i]) {
			t.Errorf("message %d after the refused one: %v, want an ordinary failure", i, errs[i])
		}
	}
	if errs[4] != nil {
		t.Errorf("another key's message: %v", errs[4])
	}
	var stored []string
	for _, m := range f.srv.Messages() {
		stored = append(stored, m.Attributes[pubsub.AttrID])
	}
	if want := []string{batch[0].ID.String(), other.ID.String()}; !sameSet(stored, want) {
		t.Errorf("stored %v, want only %v", stored, want)
	}
	// The relay dead-letters message 1 and sends the rest: the key resumes.
	for i, err := range publishCtx(t, p, batch[2:], 15*time.Second) {
		if err != nil {
			t.Errorf("after the refused message: message %d: %v", i+2, err)
		}
	}
}

// TestInvalidBatchIsolated: Pub/Sub refuses a request as a whole; the
// message it refuses alone is the permanent one, the others are stored.
func TestInvalidBatchIsolated(t *testing.T) {
	f := newFake(t, "iso", func(req *pb.PublishRequest) error {
		for _, m := range req.Messages {
			if m.Attributes["fail"] != "" {
				return invalid("does not match the topic's schema")
			}
		}
		return nil
	})
	p := newPublisher(t, pubsub.PublisherConfig{Client: f.client})
	t.Cleanup(func() { _ = p.Close() })
	batch := append(msgs("iso", "", 5, 10), msgs("iso", "k", 3, 10)...)
	batch[2].Headers = map[string]string{"fail": "1"}
	batch[6].Headers = map[string]string{"fail": "1"}
	errs := publishCtx(t, p, batch, 15*time.Second)
	for i, err := range errs {
		switch {
		case i == 2 || i == 6:
			if !publishers.IsPermanent(err) {
				t.Errorf("message %d: %v, want Permanent", i, err)
			}
		case i == 7:
			if err == nil || publishers.IsPermanent(err) {
				t.Errorf("message 7, after its key's refused one: %v, want an ordinary failure", err)
			}
		case err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
}

// TestLimits: a message over one of Pub/Sub's limits fails as Permanent,
// unsent; the others of the batch are published.
func TestLimits(t *testing.T) {
	f := newFake(t, "lim", nil)
	p := newPublisher(t, pubsub.PublisherConfig{Client: f.client})
	t.Cleanup(func() { _ = p.Close() })
	many := map[string]string{}
	for i := range pubsub.MaxAttributes {
		many["h"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	cases := []struct {
		name string
		mod  func(*outbox.Message)
		want error
	}{
		{"payload", func(m *outbox.Message) { m.Payload = make([]byte, pubsub.MaxMessageBytes) }, pubsub.ErrTooLarge},
		{"attribute count", func(m *outbox.Message) { m.Headers = many }, pubsub.ErrTooLarge},
		{"attribute name", func(m *outbox.Message) { m.Headers = map[string]string{strings.Repeat("n", 257): "v"} }, pubsub.ErrTooLarge},
		{"attribute value", func(m *outbox.Message) { m.Headers = map[string]string{"h": strings.Repeat("v", 1025)} }, pubsub.ErrTooLarge},
		{"ordering key", func(m *outbox.Message) { m.Key = strings.Repeat("k", 1025) }, pubsub.ErrTooLarge},
		{"reserved attribute", func(m *outbox.Message) { m.Headers = map[string]string{"goog-x": "v"} }, pubsub.ErrInvalid},
		{"not UTF-8", func(m *outbox.Message) { m.Headers = map[string]string{"h": "\xff"} }, pubsub.ErrInvalid},
		{"topic", func(m *outbox.Message) { m.Topic = "a/b" }, pubsub.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			batch := msgs("lim", "", 3, 10)
			tc.mod(&batch[1])
			errs := publishCtx(t, p, batch, 15*time.Second)
			if !publishers.IsPermanent(errs[1]) || !errors.Is(errs[1], tc.want) {
				t.Errorf("message over the limit: %v, want Permanent %v", errs[1], tc.want)
			}
			if errs[0] != nil || errs[2] != nil {
				t.Errorf("the others: %v, %v", errs[0], errs[2])
			}
		})
	}
	// Just within: 1,024-byte key and value, 256-byte name.
	ok := msgs("lim", strings.Repeat("k", 1024), 1, 10)
	ok[0].Headers = map[string]string{strings.Repeat("n", 256): strings.Repeat("v", 1024)}
	if err := publishCtx(t, p, ok, 15*time.Second)[0]; err != nil {
		t.Errorf("message at the limits: %v", err)
	}
}

// TestNoOrdering: with ordering off the key is an attribute only, and the
// publisher does not claim to keep a key's order.
func TestNoOrdering(t *testing.T) {
	f := newFake(t, "noord", nil)
	p := newPublisher(t, pubsub.PublisherConfig{Client: f.client, NoOrdering: true})
	t.Cleanup(func() { _ = p.Close() })
	if p.KeepsKeyOrder() {
		t.Error("KeepsKeyOrder = true with ordering off")
	}
	m := msgs("noord", "k", 1, 10)
	if err := publishCtx(t, p, m, 15*time.Second)[0]; err != nil {
		t.Fatal(err)
	}
	got := f.srv.Messages()
	if len(got) != 1 || got[0].OrderingKey != "" || got[0].Attributes[pubsub.AttrKey] != "k" {
		t.Fatalf("stored %+v, want key k as an attribute only", got)
	}
}

// TestMissingTopic: publishing to a topic that does not exist is a refused
// configuration, never a success or an outage.
func TestMissingTopic(t *testing.T) {
	f := newFake(t, "present", nil)
	p := newPublisher(t, pubsub.PublisherConfig{Client: f.client, CheckTopics: []string{"absent"}})
	t.Cleanup(func() { _ = p.Close() })
	for i, err := range publishCtx(t, p, msgs("absent", "k", 2, 10), 15*time.Second) {
		if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
			t.Errorf("message %d: %v, want Misconfigured", i, err)
		}
	}
	if err := p.Check(context.Background()); !publishers.IsMisconfigured(err) {
		t.Errorf("Check: %v, want Misconfigured", err)
	}
}

func attrIDs(ms []*gpubsub.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Attributes[pubsub.AttrID]
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
