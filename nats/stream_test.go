package nats_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// EnsureStream refuses subjects that would capture NATS's own traffic,
// before asking the server: no stream is created.
func TestEnsureStreamRefusesUnsafeSubjects(t *testing.T) {
	b := setup(t)
	name := natstest.Name(t)
	ctx := context.Background()
	for _, subjects := range [][]string{{">"}, {"*.>"}, {"*"}, {"*.*.*"}, {"ok.>", ">"}, {"$JS.API.>"}, {"$SYS.>"}, {"_INBOX.>"}} {
		err := b.pub.EnsureStream(ctx, name, subjects)
		if !errors.Is(err, outboxnats.ErrUnsafeSubjects) || !publishers.IsMisconfigured(err) {
			t.Errorf("EnsureStream(%q): got %v, want ErrUnsafeSubjects, Misconfigured", subjects, err)
		}
	}
	for _, subjects := range [][]string{nil, {"a..b"}, {"a.>.b"}, {"a b"}} {
		if err := b.pub.EnsureStream(ctx, name, subjects); err == nil {
			t.Errorf("EnsureStream(%q) succeeded", subjects)
		}
	}
	if _, err := b.js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %s: %v, want not found", name, err)
	}
}

// A stream whose subjects another stream captures already fails with an
// error naming that stream and the subjects.
func TestEnsureStreamOverlap(t *testing.T) {
	for name, nc := range map[string]*nats.Conn{"shared": natstest.Connect(t), "in-process": natstest.StartServer(t, "").Connect(t)} {
		t.Run(name, func(t *testing.T) {
			prefix, holder := natstest.NewStream(t, nc) // captures prefix.>
			pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc})
			t.Cleanup(func() { _ = pub.Close() })
			name := natstest.Name(t)
			ctx := context.Background()
			t.Cleanup(func() { _ = natstest.JetStream(t, nc).DeleteStream(context.Background(), name) })
			err := pub.EnsureStream(ctx, name, []string{prefix + ".orders.>"})
			if !errors.Is(err, outboxnats.ErrSubjectsOverlap) || !publishers.IsMisconfigured(err) ||
				!strings.Contains(err.Error(), holder) || !strings.Contains(err.Error(), prefix+".orders.>") {
				t.Fatalf("create: got %v, want ErrSubjectsOverlap naming stream %s and the subject", err, holder)
			}
			// Adding an overlapping subject to an existing stream, too.
			if err := pub.EnsureStream(ctx, name, []string{name + ".>"}); err != nil {
				t.Fatal(err)
			}
			err = pub.EnsureStream(ctx, name, []string{name + ".>", prefix + ".x"})
			if !errors.Is(err, outboxnats.ErrSubjectsOverlap) || !strings.Contains(err.Error(), holder) {
				t.Fatalf("update: got %v, want ErrSubjectsOverlap naming stream %s", err, holder)
			}
		})
	}
}
