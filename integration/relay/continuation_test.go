package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// failOnce wraps a real publisher and fails the first attempt of one
// message, as a broker's passing hiccup would.
type failOnce struct {
	publishers.Publisher
	id     uuid.UUID
	mu     sync.Mutex
	failed bool
}

func (p *failOnce) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p.mu.Lock()
	at := -1
	for i, m := range msgs {
		if m.ID == p.id && !p.failed {
			p.failed, at = true, i
		}
	}
	p.mu.Unlock()
	if at < 0 {
		return p.Publisher.Publish(ctx, msgs)
	}
	pass := append(append([]outbox.Message(nil), msgs[:at]...), msgs[at+1:]...)
	res := p.Publisher.Publish(ctx, pass)
	errs := append(append(res[:at:at], errors.New("broker hiccup")), res[at:]...)
	return errs
}

// In ordered mode the relay claims a batch's continuation while it
// publishes the batch (stores.Continuer). When one of a key's events
// fails in the batch, the continuation must send nothing of that key: its
// later events arrive after the failed one's retry, each once, while the
// other key flows on.
func TestContinuationHoldsAFailedKey(t *testing.T) {
	b := setup(t)
	const n = 60
	var a, c []outbox.Message
	for i := range n {
		a = append(a, outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "A", Payload: []byte(fmt.Sprint(i))})
		c = append(c, outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "C", Payload: []byte(fmt.Sprint(i))})
	}
	for i := range n {
		b.enqueue(t, true, a[i], c[i])
	}
	pub := &failOnce{Publisher: b.publisher(t), id: a[5].ID}
	// Batches of 20 events, 10 of each key: the first holds A's failing
	// event, its continuation A's events 11 to 20.
	start(t, b.store, pub, &relay.Config{Workers: 1, BatchSize: 20,
		RetryBackoff: outbox.Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond}})

	ids := b.arrivedIDs(t, 2*n)
	var gotA, gotC []string
	for _, id := range ids {
		switch {
		case contains(a, id):
			gotA = append(gotA, id)
		case contains(c, id):
			gotC = append(gotC, id)
		}
	}
	for name, got := range map[string][]string{"A": gotA, "C": gotC} {
		want := a
		if name == "C" {
			want = c
		}
		if len(got) != n {
			t.Fatalf("key %s: %d arrivals, want %d", name, len(got), n)
		}
		for i := range want {
			if got[i] != want[i].ID.String() {
				t.Fatalf("key %s: arrival %d is %s, want event %d (%s): out of order", name, i, got[i], i, want[i].ID)
			}
		}
	}
	waitFor(t, "every event to be deleted", 10*time.Second, func() bool { return len(b.rows(t)) == 0 })
}

func contains(ms []outbox.Message, id string) bool {
	for _, m := range ms {
		if m.ID.String() == id {
			return true
		}
	}
	return false
}
