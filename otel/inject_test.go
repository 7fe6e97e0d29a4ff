package otel_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	outboxotel "github.com/outboxgo/outbox/otel"
)

// The writer's context goes into the headers and comes out in the
// handler: the process span is the writer span's child, in its trace.
func TestRoundTrip(t *testing.T) {
	rec := newRecorder(t)
	cfg := &outboxotel.Config{TracerProvider: rec.tp, System: "test"}
	ctx, writer := rec.tp.Tracer("test").Start(context.Background(), "POST /orders")
	ctx = trace.ContextWithSpan(ctx, writer)
	orig := outbox.Message{ID: outbox.NewID(), Topic: "orders", Headers: map[string]string{"correlation-id": "c1"}}
	msgs := outboxotel.Inject(ctx, orig)
	writer.End()
	if len(orig.Headers) != 1 {
		t.Fatalf("Inject modified the caller's headers: %v", orig.Headers)
	}
	h := msgs[0].Headers
	if h["traceparent"] == "" || h["correlation-id"] != "c1" {
		t.Fatalf("headers after Inject = %v, want traceparent and correlation-id", h)
	}
	var inHandler trace.SpanContext
	handle := outboxotel.Handler(func(ctx context.Context, _ struct{}, _ inbox.Message) error {
		inHandler = trace.SpanContextFromContext(ctx)
		return nil
	}, cfg)
	if err := handle(context.Background(), struct{}{}, inboxMessage(msgs[0])); err != nil {
		t.Fatal(err)
	}
	p := rec.one(t, "outbox process orders")
	w := rec.one(t, "POST /orders")
	switch {
	case p.SpanKind != trace.SpanKindConsumer:
		t.Errorf("process span kind %v, want consumer", p.SpanKind)
	case p.SpanContext.TraceID() != w.SpanContext.TraceID():
		t.Errorf("process span in trace %s, writer in %s", p.SpanContext.TraceID(), w.SpanContext.TraceID())
	case p.Parent.SpanID() != w.SpanContext.SpanID() || !p.Parent.IsRemote():
		t.Errorf("process span's parent %v, want the writer's span %s, remote", p.Parent, w.SpanContext.SpanID())
	case inHandler.SpanID() != p.SpanContext.SpanID():
		t.Errorf("the handler ran in span %s, not the process span %s", inHandler.SpanID(), p.SpanContext.SpanID())
	}
	want := map[string]string{"messaging.system": "test", "messaging.destination.name": "orders",
		"messaging.message.id": msgs[0].ID.String(), "messaging.operation.type": "process", "messaging.operation.name": "process"}
	checkAttrs(t, p, want)
}

// A message's own traceparent wins; the header names match in any case.
func TestInjectKeepsExisting(t *testing.T) {
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	old := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	msgs := outboxotel.Inject(ctx, outbox.Message{Topic: "t", Headers: map[string]string{"Traceparent": old}})
	if len(msgs[0].Headers) != 1 || msgs[0].Headers["Traceparent"] != old {
		t.Fatalf("headers = %v, want the message's own traceparent only", msgs[0].Headers)
	}
	// And the handler reads it back under that name.
	cfg := &outboxotel.Config{TracerProvider: rec.tp}
	var got trace.SpanContext
	h := outboxotel.Handler(func(ctx context.Context, _ int, _ inbox.Message) error {
		got = trace.SpanContextFromContext(ctx)
		return nil
	}, cfg)
	if err := h(context.Background(), 0, inbox.Message{ID: outbox.NewID(), Topic: "t", Headers: msgs[0].Headers}); err != nil {
		t.Fatal(err)
	}
	if got.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("handler's trace %s, want the header's", got.TraceID())
	}
}

// Without a span in ctx, Inject returns its argument, allocating nothing.
func TestInjectWithoutSpan(t *testing.T) {
	msgs := []outbox.Message{{Topic: "a"}, {Topic: "b", Headers: map[string]string{"x": "y"}}}
	got := outboxotel.Inject(context.Background(), msgs...)
	if &got[0] != &msgs[0] || len(got[1].Headers) != 1 {
		t.Fatalf("Inject without a span changed the messages: %+v", got)
	}
	if n := testing.AllocsPerRun(100, func() { outboxotel.Inject(context.Background(), msgs...) }); n != 0 {
		t.Errorf("Inject without a span: %v allocations, want 0", n)
	}
	if got := outboxotel.Inject(context.Background()); len(got) != 0 {
		t.Fatalf("Inject of nothing = %v", got)
	}
}

// A custom propagator carries baggage too; its headers pass Enqueue's
// rules, and a header a propagator makes that would not is left out.
func TestConfigPropagator(t *testing.T) {
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	m, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	b, err := baggage.New(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx = baggage.ContextWithBaggage(ctx, b)
	cfg := &outboxotel.Config{Propagator: propagation.NewCompositeTextMapPropagator(
		propagation.TraceContext{}, propagation.Baggage{}, badPropagator{})}
	msgs := cfg.Inject(ctx, outbox.Message{Topic: "t"})
	h := msgs[0].Headers
	if h["traceparent"] == "" || h["baggage"] != "tenant=acme" || len(h) != 2 {
		t.Fatalf("headers = %v, want traceparent and baggage only", h)
	}
	// Without a span, baggage alone still travels.
	msgs = cfg.Inject(baggage.ContextWithBaggage(context.Background(), b), outbox.Message{Topic: "t"})
	if msgs[0].Headers["baggage"] != "tenant=acme" || msgs[0].Headers["traceparent"] != "" {
		t.Fatalf("headers without a span = %v, want baggage only", msgs[0].Headers)
	}
}

// badPropagator writes headers Enqueue would refuse.
type badPropagator struct{}

func (badPropagator) Inject(_ context.Context, c propagation.TextMapCarrier) {
	c.Set("outbox-trace", "reserved name")
	c.Set("bad name", "x")
	c.Set("x-padded", " padded ")
	c.Set("x-newline", "a\nb")
}
func (badPropagator) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}
func (badPropagator) Fields() []string {
	return []string{"outbox-trace", "bad name", "x-padded", "x-newline"}
}

// Driver injects on every InsertTx, and the messages it passes on are
// valid for Enqueue.
func TestDriver(t *testing.T) {
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	var got []outbox.Message
	d := outboxotel.Driver[int](driverFunc(func(_ context.Context, _ int, msgs []outbox.Message) error {
		got = msgs
		return nil
	}), nil)
	ob := outbox.New(d, nil)
	if err := ob.Enqueue(ctx, 1, outbox.Message{Topic: "t"}, outbox.Message{Topic: "u"}); err != nil {
		t.Fatal(err)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if len(got) != 2 || got[0].Headers["traceparent"] != want || got[1].Headers["traceparent"] != want {
		t.Fatalf("inserted %+v, want both with traceparent %s", got, want)
	}
	// The checked messages round-trip through Enqueue's validation.
	if err := outbox.New[int](driverFunc(func(context.Context, int, []outbox.Message) error { return nil }), nil).Enqueue(ctx, 1, got...); err != nil {
		t.Fatalf("Enqueue refused injected headers: %v", err)
	}
	failing := errors.New("db down")
	d = outboxotel.Driver[int](driverFunc(func(context.Context, int, []outbox.Message) error { return failing }), nil)
	if err := d.InsertTx(ctx, 1, got); !errors.Is(err, failing) {
		t.Fatalf("InsertTx = %v, want the driver's error", err)
	}
}

type driverFunc func(ctx context.Context, tx int, msgs []outbox.Message) error

func (f driverFunc) InsertTx(ctx context.Context, tx int, msgs []outbox.Message) error {
	return f(ctx, tx, msgs)
}

// inboxMessage is m as a subscriber decodes it.
func inboxMessage(m outbox.Message) inbox.Message {
	return inbox.Message{ID: m.ID, Topic: m.Topic, Key: m.Key, Type: m.Type, Payload: m.Payload, Headers: m.Headers, Delivery: 1}
}
