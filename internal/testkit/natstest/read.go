package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// WaitForCount reads stream from its start with a plain ordered consumer
// until at least n messages arrived or timeout passed, and returns every
// message the stream holds by then (possibly fewer than n: the caller
// decides whether that fails the test).
func WaitForCount(t testing.TB, js jetstream.JetStream, stream string, n int, timeout time.Duration) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", stream, err)
	}
	var got []jetstream.Msg
	fetch := func(want int, wait time.Duration) {
		batch, err := cons.Fetch(want, jetstream.FetchMaxWait(wait))
		if err != nil {
			t.Fatalf("fetch from %s: %v", stream, err)
		}
		for m := range batch.Messages() {
			got = append(got, m)
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			t.Logf("fetch from %s: %v", stream, err)
		}
	}
	for len(got) < n {
		left := time.Until(deadline(ctx))
		if left <= 0 {
			return got
		}
		fetch(n-len(got), min(left, time.Second))
	}
	// Take whatever else is stored already, so callers can see extras.
	for {
		info, err := streamInfo(ctx, js, stream)
		if err != nil || int(info.State.Msgs) <= len(got) || ctx.Err() != nil {
			return got
		}
		fetch(int(info.State.Msgs)-len(got), min(time.Until(deadline(ctx)), time.Second))
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

func streamInfo(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}
