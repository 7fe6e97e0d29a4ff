package nats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// privateBundle is a publisher and a stream on a private server the test
// may stop.
type privateBundle struct {
	srv    *natstest.Server
	pub    *outboxnats.Publisher
	read   func(n int) int
	prefix string
}

func setupPrivate(t *testing.T) privateBundle {
	t.Helper()
	srv := natstest.StartServer(t, "")
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: prefix})
	t.Cleanup(func() { _ = pub.Close() })
	read := func(n int) int {
		seen := map[string]bool{}
		for _, m := range natstest.WaitForCount(t, js, stream, n, 30*time.Second) {
			id := m.Headers().Get(outboxnats.HeaderMsgID)
			if seen[id] {
				t.Errorf("message %s stored twice", id)
			}
			seen[id] = true
		}
		return len(seen)
	}
	return privateBundle{srv: srv, pub: pub, read: read, prefix: prefix}
}

// With the server down, Publish fails at once rather than waiting out its
// context.
func TestOutageFailsFast(t *testing.T) {
	b := setupPrivate(t)
	b.srv.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	errs := b.pub.Publish(ctx, []outbox.Message{msg("t"), msg("t"), msg("t")})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Publish took %v with the server down", d)
	}
	for i, err := range errs {
		if !publishers.IsUnavailable(err) {
			t.Errorf("message %d: got %v, want Unavailable", i, err)
		}
	}
}

// The server dies while a large batch is in flight: every message is
// either acked or fails as Unavailable, and re-sending the failed ones once
// the server is back stores each message exactly once.
func TestOutageMidBatch(t *testing.T) {
	b := setupPrivate(t)
	const n = 5000
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "k", Payload: make([]byte, 200)}
	}
	var wg sync.WaitGroup
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wg.Go(func() { errs = b.pub.Publish(ctx, msgs) })
	b.srv.Shutdown()
	wg.Wait()
	var failed []outbox.Message
	for i, err := range errs {
		if err == nil {
			continue
		}
		if !publishers.IsUnavailable(err) {
			t.Fatalf("message %d: got %v, want nil or Unavailable", i, err)
		}
		failed = append(failed, msgs[i])
	}
	t.Logf("%d of %d messages failed during the outage", len(failed), n)

	b.srv.Start()
	retryUntilAcked(t, b.pub, failed)
	if got := b.read(n); got != n {
		t.Fatalf("stream holds %d distinct messages, want %d", got, n)
	}
}

// retryUntilAcked re-publishes what fails, as the relay would, for up to
// a minute.
func retryUntilAcked(t *testing.T, p *outboxnats.Publisher, msgs []outbox.Message) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(msgs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs := p.Publish(ctx, msgs)
		cancel()
		var failed []outbox.Message
		for i, err := range errs {
			if err != nil {
				if !publishers.IsUnavailable(err) {
					t.Fatalf("after restart: %v", err)
				}
				failed = append(failed, msgs[i])
			}
		}
		if len(failed) > 0 && time.Now().After(deadline) {
			t.Fatalf("%d messages still fail a minute after the restart: %v", len(failed), errs)
		}
		msgs = failed
		if len(msgs) > 0 {
			<-tick.C
		}
	}
}
