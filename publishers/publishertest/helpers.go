package publishertest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Timeouts of the suite: generous, since they only bound a failure.
const (
	publishTimeout = 15 * time.Second
	readTimeout    = 15 * time.Second
)

// open returns a publisher of env, closed at cleanup.
func open(t *testing.T, env Env) publishers.Publisher {
	t.Helper()
	p := env.NewPublisher(t)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	keepsOrder(p)
	return p
}

// keepsOrder asks p whether it keeps key order (publishers.OrderKeeper),
// as a relay does when it starts: a publisher that says yes publishes a
// key's messages differently from then on, and the cases see it as a
// relay uses it.
func keepsOrder(p publishers.Publisher) bool {
	k, ok := p.(publishers.OrderKeeper)
	return ok && k.KeepsKeyOrder()
}

// messages returns n messages to topic, all with key, payloads of size bytes.
func messages(topic, key string, n, size int) []outbox.Message {
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		payload := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		msgs[i] = outbox.Message{
			ID:        outbox.NewID(),
			Topic:     topic,
			Key:       key,
			Type:      "Test",
			Payload:   payload,
			Headers:   map[string]string{"seq": fmt.Sprint(i)},
			CreatedAt: time.Now().UTC(),
		}
	}
	return msgs
}

// publish publishes msgs with the suite's timeout and checks the result count.
func publish(t *testing.T, p publishers.Publisher, msgs []outbox.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish of %d messages returned %d results", len(msgs), len(errs))
	}
	return errs
}

// publishOK publishes msgs and fails the test unless every one is acked.
func publishOK(t *testing.T, p publishers.Publisher, msgs []outbox.Message) {
	t.Helper()
	for i, err := range publish(t, p, msgs) {
		if err != nil {
			t.Fatalf("message %d of %d: %v", i, len(msgs), err)
		}
	}
}

// read reads exactly n messages of env, failing on fewer or more.
func read(t *testing.T, env Env, n int) []Received {
	t.Helper()
	got := env.Read(t, n, readTimeout)
	if len(got) != n {
		t.Fatalf("a consumer read %d messages, want %d", len(got), n)
	}
	return got
}

// ids returns the IDs of msgs as strings.
func ids(msgs []outbox.Message) []string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = m.ID.String()
	}
	return s
}

// receivedIDs returns the IDs of got.
func receivedIDs(got []Received) []string {
	s := make([]string, len(got))
	for i, r := range got {
		s[i] = r.ID
	}
	return s
}

// checkNotPermanent fails the test for a nil error or a Permanent one: what
// the caller (or the broker's outage) caused must not dead-letter messages.
func checkNotPermanent(t *testing.T, what string, errs []error) {
	t.Helper()
	for i, err := range errs {
		switch {
		case err == nil:
			t.Errorf("%s: message %d: nil error", what, i)
		case publishers.IsPermanent(err):
			t.Errorf("%s: message %d: classified Permanent: %v", what, i, err)
		}
	}
}
