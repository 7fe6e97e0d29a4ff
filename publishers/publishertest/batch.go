package publishertest

import (
	"slices"
	"sync"
	"testing"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// testOversizeFailsAlone: in a batch, a message the broker refuses fails
// alone, classified Permanent, and the others arrive.
func testOversizeFailsAlone(t *testing.T, env Env) {
	if env.MaxPayload == 0 {
		t.Skip("Env.MaxPayload is 0")
	}
	p := open(t, env)
	msgs := messages(env.Topic, "k", 5, 100)
	const bad = 2
	msgs[bad].Payload = make([]byte, env.MaxPayload+1)
	errs := publish(t, p, msgs)
	for i, err := range errs {
		switch {
		case i == bad && !publishers.IsPermanent(err):
			t.Errorf("oversize message %d: got %v, want an error classified Permanent", i, err)
		case i != bad && err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	// Same key: had the oversize one been stored, it would come before the
	// last two and be read among the first four.
	got := read(t, env, len(msgs)-1)
	want := slices.Delete(ids(msgs), bad, bad+1)
	if !slices.Equal(receivedIDs(got), want) {
		t.Errorf("read %v, want %v", receivedIDs(got), want)
	}
}

// testOrderPerKey: the messages of one key in one batch are stored in
// batch order.
func testOrderPerKey(t *testing.T, env Env) {
	p := open(t, env)
	const n = 200
	a, b := messages(env.Topic, "key-a", n, 50), messages(env.Topic, "key-b", n, 50)
	var batch []outbox.Message
	for i := range n {
		batch = append(batch, a[i], b[i])
	}
	publishOK(t, p, batch)
	got := read(t, env, 2*n)
	perKey := map[string][]string{}
	for _, r := range got {
		perKey[r.Key] = append(perKey[r.Key], r.ID)
	}
	for key, msgs := range map[string][]outbox.Message{"key-a": a, "key-b": b} {
		if !slices.Equal(perKey[key], ids(msgs)) {
			t.Errorf("key %s: read in another order than published (%d read)", key, len(perKey[key]))
		}
	}
}

// testConcurrent: Publish calls from several goroutines at once on one
// publisher each get their own results.
func testConcurrent(t *testing.T, env Env) {
	p := open(t, env)
	const callers, n = 4, 50
	var wg sync.WaitGroup
	want := map[string]bool{}
	batches := make([][]outbox.Message, callers)
	for c := range batches {
		batches[c] = messages(env.Topic, "", n, 100)
		for _, id := range ids(batches[c]) {
			want[id] = true
		}
	}
	for _, batch := range batches {
		wg.Go(func() { publishOK(t, p, batch) })
	}
	wg.Wait()
	got := read(t, env, callers*n)
	for _, r := range got {
		if !want[r.ID] {
			t.Errorf("read unexpected or repeated message %s", r.ID)
		}
		delete(want, r.ID)
	}
}
