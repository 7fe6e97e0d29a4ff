package relay_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
)

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
	pub := &rejecting{Publisher: b.publisher(t), once: true, reject: map[uuid.UUID]error{a[5].ID: errors.New("broker hiccup")}}
	// Batches of 20 events, 10 of each key: the first holds A's failing
	// event, its continuation A's events 11 to 20.
	start(t, b.store, pub, &relay.Config{Workers: 1, BatchSize: 20,
		RetryBackoff: outbox.Backoff{Min: 50 * time.Millisecond, Max: 50 * time.Millisecond}})

	got := map[string][]string{} // arrivals by key
	keyOf := map[string]string{}
	for i := range n {
		keyOf[a[i].ID.String()], keyOf[c[i].ID.String()] = "A", "C"
	}
	for _, id := range b.arrivedIDs(t, 2*n) {
		got[keyOf[id]] = append(got[keyOf[id]], id)
	}
	for key, want := range map[string][]outbox.Message{"A": a, "C": c} {
		if len(got[key]) != n {
			t.Fatalf("key %s: %d arrivals, want %d", key, len(got[key]), n)
		}
		for i, m := range want {
			if got[key][i] != m.ID.String() {
				t.Fatalf("key %s: arrival %d is %s, want event %d (%s): out of order", key, i, got[key][i], i, m.ID)
			}
		}
	}
	waitFor(t, "every event to be deleted", 10*time.Second, func() bool { return len(b.rows(t)) == 0 })
}
