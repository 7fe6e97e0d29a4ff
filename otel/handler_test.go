package otel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	outboxotel "github.com/outboxgo/outbox/otel"
)

// A message without a trace context, or with one that does not parse,
// gets a span in the trace of ctx; the handler runs all the same.
func TestHandlerWithoutContext(t *testing.T) {
	for name, headers := range map[string]map[string]string{
		"none":        nil,
		"other":       {"correlation-id": "c1"},
		"bad":         {"traceparent": "00-not-a-trace-context-01"},
		"zero trace":  {"traceparent": "00-00000000000000000000000000000000-b7ad6b7169203331-01"},
		"bad version": {"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := newRecorder(t)
			ran := false
			h := outboxotel.Handler(func(context.Context, struct{}, inbox.Message) error { ran = true; return nil },
				&outboxotel.Config{TracerProvider: rec.tp})
			// In a trace of its own: a new root.
			if err := h(context.Background(), struct{}{}, inbox.Message{ID: outbox.NewID(), Topic: "t", Headers: headers}); err != nil || !ran {
				t.Fatalf("handler: err %v, ran %v", err, ran)
			}
			if p := rec.one(t, "outbox process t"); p.Parent.IsValid() {
				t.Fatalf("span's parent %v, want a root span", p.Parent)
			}
			// In the caller's trace: its child.
			ctx, parent := rec.tp.Tracer("test").Start(context.Background(), "subscriber")
			if err := h(ctx, struct{}{}, inbox.Message{ID: outbox.NewID(), Topic: "u", Headers: headers}); err != nil {
				t.Fatal(err)
			}
			parent.End()
			if p := rec.one(t, "outbox process u"); p.Parent.SpanID() != parent.SpanContext().SpanID() || p.Parent.IsRemote() {
				t.Fatalf("span's parent %v, want the caller's span %s", p.Parent, parent.SpanContext().SpanID())
			}
		})
	}
}

// The handler's error, and its class, are on the span; the error comes
// back unchanged.
func TestHandlerError(t *testing.T) {
	rec := newRecorder(t)
	cfg := &outboxotel.Config{TracerProvider: rec.tp}
	failing := errors.New("provider unavailable")
	for name, c := range map[string]struct {
		err   error
		class string
	}{
		"retry":     {failing, "_OTHER"},
		"permanent": {inbox.Permanent(failing), "permanent"},
	} {
		h := outboxotel.Handler(func(context.Context, struct{}, inbox.Message) error { return c.err }, cfg)
		if err := h(context.Background(), struct{}{}, inbox.Message{ID: outbox.NewID(), Topic: name}); err != c.err { //nolint:errorlint // the handler's error itself, unwrapped
			t.Fatalf("%s: handler returned %v, want %v", name, err, c.err)
		}
		s := rec.one(t, "outbox process "+name)
		if s.Status.Code != codes.Error || s.Status.Description != c.err.Error() {
			t.Errorf("%s: status %+v, want Error %q", name, s.Status, c.err)
		}
		if !hasException(s, c.err.Error()) {
			t.Errorf("%s: no exception event for %q: %+v", name, c.err, s.Events)
		}
		checkAttrs(t, s, map[string]string{"error.type": c.class})
	}
}

// A panic ends the span, with status Error, and goes on up.
func TestHandlerPanic(t *testing.T) {
	rec := newRecorder(t)
	h := outboxotel.Handler(func(context.Context, struct{}, inbox.Message) error { panic("boom") },
		&outboxotel.Config{TracerProvider: rec.tp})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the handler's panic", r)
			}
		}()
		_ = h(context.Background(), struct{}{}, inbox.Message{ID: outbox.NewID(), Topic: "t"})
	}()
	if s := rec.one(t, "outbox process t"); s.Status.Code != codes.Error {
		t.Fatalf("status %+v, want Error", s.Status)
	}
}

// With the default (global, unset) provider, or a no-op one, the handler
// runs with ctx as it is, at no cost.
func TestHandlerOff(t *testing.T) {
	for name, cfg := range map[string]*outboxotel.Config{
		"global default": nil,
		"noop":           {TracerProvider: noop.NewTracerProvider()},
	} {
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, 1)
		var got context.Context
		h := outboxotel.Handler(func(ctx context.Context, _ struct{}, _ inbox.Message) error {
			got = ctx
			return nil
		}, cfg)
		msg := inbox.Message{ID: outbox.NewID(), Topic: "t",
			Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
		if err := h(ctx, struct{}{}, msg); err != nil {
			t.Fatal(err)
		}
		if got != ctx {
			t.Errorf("%s: the handler got another context", name)
		}
		if !race {
			if n := testing.AllocsPerRun(100, func() { _ = h(ctx, struct{}{}, msg) }); n != 0 {
				t.Errorf("%s: %v allocations per message, want 0", name, n)
			}
		}
	}
}

func hasException(s tracetest.SpanStub, msg string) bool {
	for _, e := range s.Events {
		if e.Name != "exception" {
			continue
		}
		for _, a := range e.Attributes {
			if a.Key == "exception.message" && a.Value.AsString() == msg {
				return true
			}
		}
	}
	return false
}

// checkAttrs checks that s has the attributes of want, as strings.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, a := range s.Attributes {
		got[a.Key] = a.Value.String()
	}
	for k, v := range want {
		if got[attribute.Key(k)] != v {
			t.Errorf("span %q: attribute %s = %q, want %q (all: %v)", s.Name, k, got[attribute.Key(k)], v, fmt.Sprint(got))
		}
	}
}
