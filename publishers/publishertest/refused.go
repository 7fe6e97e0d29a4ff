package publishertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/outboxgo/outbox/publishers"
)

// Refusal is a publisher the broker must refuse: wrong credentials, or a
// target the configuration names that does not exist (a database, vhost,
// exchange or stream).
type Refusal struct {
	// Name says what is wrong ("wrong password", "unknown vhost").
	Name string
	// New builds the refused publisher with its broker package's own
	// constructor, from a URL where the package takes one, returning the
	// constructor's error as it is. Its messages for env.Topic would land
	// where env.Read sees them were it not refused, wherever the refused
	// target allows.
	New func(t *testing.T, env Env) (publishers.Publisher, error)
}

// testRefused: a publisher the broker refuses never reports a message
// published, never dead-letters one (it is not the message's fault), and
// says the configuration is wrong — at construction, at Check, and at every
// Publish — rather than that the broker is down.
func testRefused(t *testing.T, env Env, r Refusal) {
	p, err := r.New(t, env)
	if err != nil {
		t.Logf("New: %v", err)
		if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
			t.Errorf("New: %v: want an error classified Misconfigured (not Unavailable)", err)
		}
		if p != nil {
			t.Errorf("New returned a publisher with its error")
		}
		return
	}
	t.Cleanup(func() { _ = p.Close() })
	keepsOrder(p)
	c, ok := p.(publishers.Checker)
	if !ok {
		t.Fatalf("%T does not implement publishers.Checker", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	err = c.Check(ctx)
	cancel()
	t.Logf("Check: %v", err)
	if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Errorf("Check: %v: want an error classified Misconfigured (not Unavailable)", err)
	}
	// Twice: the first call may be the one that connects.
	for round := range 2 {
		msgs := messages(env.Topic, "k", 3, 10)
		errs := publish(t, p, msgs)
		for i, err := range errs {
			switch {
			case err == nil:
				t.Errorf("round %d: message %d reported published", round, i)
			case publishers.IsPermanent(err):
				t.Errorf("round %d: message %d classified Permanent (would be dead-lettered): %v", round, i, err)
			case !publishers.IsMisconfigured(err):
				t.Errorf("round %d: message %d: %v: want an error classified Misconfigured", round, i, err)
			}
		}
	}
	// Whatever the refused publisher did, a good one's message is read
	// alone: nothing of the refused one arrived before it.
	good := open(t, env)
	sentinel := messages(env.Topic, "k", 1, 10)
	publishOK(t, good, sentinel)
	got := read(t, env, 1)
	if !slices.Equal(receivedIDs(got), ids(sentinel)) {
		t.Errorf("read %v, want only the good publisher's %v", receivedIDs(got), ids(sentinel))
	}
}

// testCheck: a publisher of a good configuration passes Check.
func testCheck(t *testing.T, env Env) {
	p := open(t, env)
	c, ok := p.(publishers.Checker)
	if !ok {
		t.Fatalf("%T does not implement publishers.Checker", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
}
