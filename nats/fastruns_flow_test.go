package nats_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The publisher never has more of a batch in flight than the server's
// window allows: two flows (the server's "msgs") past the last flow
// acknowledgement, one flow of one before the first. An observer on the
// same server sees every message the publisher sends and every answer the
// server sends it, in the server's order: an acknowledgement reaches it
// before any message the publisher sent on reading it. Two calls at once
// share the stream, so the server starts the second batch at a flow of
// one and ramps it up.
func TestFastKeyRunsFlowWindow(t *testing.T) {
	e := newFastEnv(t, &jetstream.StreamConfig{AllowBatchPublish: true, Storage: jetstream.FileStorage})
	srvURL := e.pub.Conn().ConnectedUrl()
	obs, err := nats.Connect(srvURL)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	seen := make(chan *nats.Msg, 100000)
	sub, err := obs.ChanSubscribe(">", seen)
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, k := range []string{"a", "b"} {
		wg.Go(func() { publishOK(t, e.pub, keyed(3000, k+"1", k+"2")) })
	}
	wg.Wait()
	publishOK(t, e.pub, keyed(1500, "c")) // alone
	if err := obs.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = sub.Unsubscribe()
	close(seen)
	type window struct{ acked, flow, sent uint64 }
	windows := map[string]*window{}
	held := 0 // messages sent at the window's edge: the window held the publisher back
	for m := range seen {
		reply := m.Reply
		if reply == "" {
			reply = m.Subject // an answer of the server's
		}
		toks := strings.Split(reply, ".")
		if len(toks) < 8 || toks[len(toks)-1] != "$FI" {
			continue
		}
		id := toks[len(toks)-6]
		w := windows[id]
		if w == nil {
			w = &window{flow: 1}
			windows[id] = w
		}
		if m.Reply == "" {
			var ack struct {
				Type string `json:"type"`
				Seq  uint64 `json:"seq"`
				Msgs uint64 `json:"msgs"`
			}
			if json.Unmarshal(m.Data, &ack) == nil && ack.Type == "ack" {
				w.acked, w.flow = max(w.acked, ack.Seq), ack.Msgs
			}
			continue
		}
		var seq uint64
		fmt.Sscan(toks[len(toks)-3], &seq)
		if seq > w.acked+2*w.flow {
			t.Fatalf("batch %s: message %d sent with %d acknowledged at a flow of %d: over the window", id, seq, w.acked, w.flow)
		}
		if seq == w.acked+2*w.flow {
			held++
		}
		w.sent = max(w.sent, seq)
	}
	if len(windows) != 3 {
		t.Fatalf("saw %d batches, want 3", len(windows))
	}
	if held == 0 {
		t.Fatal("no message at the window's edge: the window was never tested")
	}
	t.Logf("%d batches, %d messages sent at the window's edge", len(windows), held)
}
