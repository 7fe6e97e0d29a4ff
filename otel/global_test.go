package otel_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	outboxotel "github.com/outboxgo/outbox/otel"
)

// Wrappers built with the global provider, before the program sets one,
// start recording once it does, and stop when it sets a no-op one. The
// test sets the global provider, so it runs in a process of its own.
func TestGlobalProvider(t *testing.T) {
	if os.Getenv("OUTBOX_OTEL_GLOBAL_TEST") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGlobalProvider$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "OUTBOX_OTEL_GLOBAL_TEST=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestGlobalProvider") {
			t.Fatalf("the test's own process: %v\n%s", err, out)
		}
		return
	}
	pub := outboxotel.Publisher(&fakePub{}, nil)
	h := outboxotel.Handler(func(context.Context, int, inbox.Message) error { return nil }, nil)
	step := func() {
		pub.Publish(context.Background(), []outbox.Message{{ID: outbox.NewID(), Topic: "t"}})
		_ = h(context.Background(), 0, inbox.Message{ID: outbox.NewID(), Topic: "t"})
	}
	rec := newRecorder(t)
	step() // unset: nothing to record, and nowhere to
	otelapi.SetTracerProvider(rec.tp)
	step()
	if len(rec.named("outbox publish t")) != 1 || len(rec.named("outbox process t")) != 1 {
		t.Fatalf("after SetTracerProvider: spans %+v, want a publish and a process span", rec.exp.GetSpans())
	}
	otelapi.SetTracerProvider(noop.NewTracerProvider())
	step()
	if n := len(rec.exp.GetSpans()); n != 2 {
		t.Fatalf("after a no-op provider: %d spans, want the 2 of before", n)
	}
}
