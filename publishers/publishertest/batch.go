package publishertest

import (
	"slices"
	"sync"
	"testing"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// testOversizeFailsAlone: in a batch, a message the broker refuses fails,
// classified Permanent, and the others arrive — except, from a publisher
// that keeps key order (publishers.OrderKeeper), the later messages of its
// key: those must not be stored, and each fails classified NotSent only
// (never sent, so never charged). Another key's messages, interleaved,
// arrive either way, and each key's in order.
func testOversizeFailsAlone(t *testing.T, env Env) {
	if env.MaxPayload == 0 {
		t.Skip("Env.MaxPayload is 0")
	}
	p := open(t, env)
	keeps := keepsOrder(p)
	k, j := messages(env.Topic, "k", 5, 100), messages(env.Topic, "j", 5, 100)
	const bad = 2
	k[bad].Payload = make([]byte, env.MaxPayload+1)
	var msgs []outbox.Message
	for i := range k {
		msgs = append(msgs, k[i], j[i])
	}
	errs := publish(t, p, msgs)
	wantK := slices.Delete(slices.Clone(k), bad, bad+1)
	if keeps {
		wantK = k[:bad]
	}
	for i, err := range errs {
		m := msgs[i]
		switch {
		case m.ID == k[bad].ID:
			if !publishers.IsPermanent(err) {
				t.Errorf("oversize message: got %v, want an error classified Permanent", err)
			}
		case keeps && m.Key == "k" && i > 2*bad:
			if !publishers.IsNotSent(err) || publishers.IsPermanent(err) || publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
				t.Errorf("message %d, after the oversize one of its key (the publisher keeps key order): got %v, want an error classified NotSent only", i, err)
			}
		case err != nil:
			t.Errorf("message %d: %v", i, err)
		}
	}
	got := read(t, env, len(wantK)+len(j))
	perKey := map[string][]string{}
	for _, r := range got {
		perKey[r.Key] = append(perKey[r.Key], r.ID)
	}
	for key, want := range map[string][]outbox.Message{"k": wantK, "j": j} {
		if !slices.Equal(perKey[key], ids(want)) {
			t.Errorf("key %s: read %v, want %v", key, perKey[key], ids(want))
		}
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
