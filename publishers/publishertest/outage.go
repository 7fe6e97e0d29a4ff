package publishertest

import (
	"context"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// How long the outage case gives a publisher to recover once the broker is
// back, and how often it tries meanwhile.
const (
	recoverTimeout = 60 * time.Second
	retryEvery     = 100 * time.Millisecond
)

// testOutage: while the broker is down every message fails as Unavailable;
// once it is back the same publisher publishes again.
func testOutage(t *testing.T, o Outage) {
	p := open(t, o.Env)
	before := messages(o.Topic, "k", 5, 100)
	publishOK(t, p, before)

	o.Stop(t)
	during := messages(o.Topic, "k", 5, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	errs := p.Publish(ctx, during)
	cancel()
	if len(errs) != len(during) {
		t.Fatalf("Publish of %d messages returned %d results", len(during), len(errs))
	}
	if len(errs) > 0 {
		t.Logf("broker down: message 0: %v", errs[0])
	}
	for i, err := range errs {
		if !publishers.IsUnavailable(err) {
			t.Errorf("broker down: message %d: got %v, want an error classified Unavailable", i, err)
		}
	}

	o.Start(t)
	republish(t, p, during)
	got := o.Read(t, len(before)+len(during), readTimeout)
	seen := map[string]int{}
	for _, r := range got {
		seen[r.ID]++
	}
	dedup := o.Dedup
	for _, id := range append(ids(before), ids(during)...) {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("message %s lost", id)
		case n > 1 && dedup:
			t.Errorf("message %s stored %d times despite Dedup", id, n)
		}
	}
}

// republish publishes the messages of msgs that fail until all are acked,
// as a relay would, or fails the test after recoverTimeout.
func republish(t *testing.T, p publishers.Publisher, msgs []outbox.Message) {
	t.Helper()
	deadline := time.Now().Add(recoverTimeout)
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	pending := msgs
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs := p.Publish(ctx, pending)
		cancel()
		var failed []outbox.Message
		var last error
		for i, err := range errs {
			if err != nil {
				if publishers.IsPermanent(err) {
					t.Fatalf("after the broker came back: message %d classified Permanent: %v", i, err)
				}
				failed, last = append(failed, pending[i]), err
			}
		}
		if len(failed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publisher did not recover within %v after the broker came back: %d messages still fail, e.g. %v", recoverTimeout, len(failed), last)
		}
		pending = failed
		<-tick.C
	}
}
