package subscribertest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
)

// Refusal is a subscriber the broker must refuse: wrong credentials, or a
// target the configuration names that does not exist (a vhost, a stream).
type Refusal struct {
	// Name says what is wrong ("wrong password").
	Name string
	// New builds the refused subscriber of env's topic from c, with its
	// broker package's own constructor, returning the constructor's error
	// as it is.
	New func(t *testing.T, env Env, c Config) (Subscriber, error)
}

// testRefused: a subscriber the broker refuses fails at New or Start, at
// once and with the refusal in its error — it does not retry silently, nor
// run without consuming — and consumes nothing: no handler runs, no effect
// commits.
func testRefused(t *testing.T, h Harness, r Refusal) {
	f := setup(t, h)
	ev := events(1)[0]
	f.Publish(t, ev)
	var calls atomic.Int32
	c := f.config("refused")
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		calls.Add(1)
		return f.effect(ctx, tx, m)
	}
	s, err := r.New(t, f.Env, c)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = s.Start(ctx)
		cancel()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			_ = s.Stop(ctx)
			cancel()
			t.Fatal("New and Start succeeded for a subscriber the broker refuses")
		}
	}
	t.Logf("refused: %v", err)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the handler ran %d times", n)
	}
	if n := f.effects(ev.ID); n != 0 {
		t.Fatalf("%d effects of a refused subscriber", n)
	}
}
