package publishertest

import (
	"context"
	"testing"

	"go.uber.org/goleak"
)

// testCanceledContext: a call whose context already ended fails every
// message, and never as Permanent (it is not the message's fault).
func testCanceledContext(t *testing.T, env Env) {
	p := open(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msgs := messages(env.Topic, "k", 3, 10)
	errs := p.Publish(ctx, msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("Publish of %d messages returned %d results", len(msgs), len(errs))
	}
	checkNotPermanent(t, "canceled context", errs)
}

// testPublishAfterClose: Publish after Close fails every message, not as
// Permanent, without panicking; Close again is harmless.
func testPublishAfterClose(t *testing.T, env Env) {
	p := open(t, env)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkNotPermanent(t, "publish after Close", publish(t, p, messages(env.Topic, "k", 3, 10)))
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// testCloseLeavesNoGoroutines: after Close, no goroutine the publisher
// started is left.
func testCloseLeavesNoGoroutines(t *testing.T, env Env) {
	before := goleak.IgnoreCurrent()
	p := env.NewPublisher(t)
	msgs := messages(env.Topic, "k", 50, 100)
	publishOK(t, p, msgs)
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t, before)
	read(t, env, len(msgs))
}
