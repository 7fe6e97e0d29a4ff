package publishertest

import (
	"slices"
	"testing"
)

// testDedup: when the publisher declares Dedup, re-publishing IDs the
// broker stored does not store them again, and reports success.
func testDedup(t *testing.T, env Env) {
	if !env.Dedup {
		t.Skip("the broker does not drop re-sent IDs (Env.Dedup is false)")
	}
	p := open(t, env)
	msgs := messages(env.Topic, "k", 10, 100)
	publishOK(t, p, msgs)
	publishOK(t, p, msgs) // a relay that crashed between ack and mark
	// A fresh message of the same key after the re-sends: once it is in,
	// any duplicate stored would have been read before it.
	sentinel := messages(env.Topic, "k", 1, 10)
	publishOK(t, p, sentinel)
	got := read(t, env, len(msgs)+1)
	if want := append(ids(msgs), ids(sentinel)...); !slices.Equal(receivedIDs(got), want) {
		t.Errorf("read %v, want %v", receivedIDs(got), want)
	}
}
