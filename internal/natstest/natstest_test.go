package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A restarted server keeps its port and its streams, and a connection made
// before the outage works again after it.
func TestServerRestartKeepsPortAndData(t *testing.T) {
	srv := natstest.StartServer(t, "")
	url := srv.URL()
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.Publish(ctx, prefix+".a", []byte("before")); err != nil {
		t.Fatal(err)
	}

	srv.Restart()
	if srv.URL() != url {
		t.Fatalf("URL after restart %s, want %s", srv.URL(), url)
	}
	// The old connection reconnects by itself; publish until it has.
	var err error
	for ctx.Err() == nil {
		if _, err = js.Publish(ctx, prefix+".a", []byte("after"), jetstream.WithRetryAttempts(10)); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
	got := natstest.WaitForCount(t, js, stream, 2, 10*time.Second)
	if len(got) != 2 || string(got[0].Data()) != "before" || string(got[1].Data()) != "after" {
		t.Fatalf("read %d messages after restart, want before and after", len(got))
	}
}

// WaitForCount returns what is there when fewer than n arrive in time.
func TestWaitForCountTimesOut(t *testing.T) {
	nc := natstest.Connect(t)
	_, stream := natstest.NewStream(t, nc)
	start := time.Now()
	got := natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 1, 300*time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("read %d messages from an empty stream", len(got))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitForCount took %v with a 300ms timeout", d)
	}
}
