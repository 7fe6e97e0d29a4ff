package otel_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxgo/outbox"
	outboxotel "github.com/outboxgo/outbox/otel"
	"github.com/outboxgo/outbox/publishers"
)

// fakePub records what it is given and fails the messages fail says.
type fakePub struct {
	got    []outbox.Message
	ctx    context.Context
	fail   map[int]error
	closed bool
}

func (p *fakePub) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p.ctx, p.got = ctx, msgs
	errs := make([]error, len(msgs))
	for i := range msgs {
		errs[i] = p.fail[i]
	}
	return errs
}

func (p *fakePub) Close() error { p.closed = true; return nil }

type checkerPub struct{ fakePub }

func (*checkerPub) Check(context.Context) error { return errors.New("checked") }

type keeperPub struct{ fakePub }

func (*keeperPub) KeepsKeyOrder() bool { return true }

type bothPub struct{ fakePub }

func (*bothPub) Check(context.Context) error { return errors.New("checked") }
func (*bothPub) KeepsKeyOrder() bool         { return true }

// The wrapper is a Checker and an OrderKeeper exactly when the wrapped
// publisher is, and forwards to it.
func TestPublisherInterfaces(t *testing.T) {
	for name, c := range map[string]struct {
		pub             publishers.Publisher
		checker, keeper bool
	}{
		"plain":   {&fakePub{}, false, false},
		"checker": {&checkerPub{}, true, false},
		"keeper":  {&keeperPub{}, false, true},
		"both":    {&bothPub{}, true, true},
	} {
		w := outboxotel.Publisher(c.pub, nil)
		ch, isChecker := w.(publishers.Checker)
		k, isKeeper := w.(publishers.OrderKeeper)
		if isChecker != c.checker || isKeeper != c.keeper {
			t.Errorf("%s: wrapper is Checker %v, OrderKeeper %v; want %v, %v", name, isChecker, isKeeper, c.checker, c.keeper)
			continue
		}
		if isChecker {
			if err := ch.Check(context.Background()); err == nil || err.Error() != "checked" {
				t.Errorf("%s: Check = %v, want the wrapped publisher's", name, err)
			}
		}
		if isKeeper && !k.KeepsKeyOrder() {
			t.Errorf("%s: KeepsKeyOrder = false", name)
		}
		if err := w.Close(); err != nil {
			t.Errorf("%s: Close = %v", name, err)
		}
		if u, ok := w.(interface{ Unwrap() publishers.Publisher }); !ok || u.Unwrap() != c.pub {
			t.Errorf("%s: Unwrap does not give the wrapped publisher", name)
		}
	}
	p := &fakePub{}
	_ = outboxotel.Publisher(p, nil).Close()
	if !p.closed {
		t.Error("Close did not close the wrapped publisher")
	}
}

// One Producer span per call, linked to each message's writer span, with
// the messaging attributes; the messages go on unchanged, their headers
// carrying the writer's context.
func TestPublisherSpan(t *testing.T) {
	rec := newRecorder(t)
	tr := rec.tp.Tracer("test")
	ctxA, a := tr.Start(context.Background(), "writer A")
	ctxB, b := tr.Start(context.Background(), "writer B")
	a.End()
	b.End()
	msgs := append(outboxotel.Inject(ctxA, outbox.Message{ID: outbox.NewID(), Topic: "orders"}),
		outboxotel.Inject(ctxB, outbox.Message{ID: outbox.NewID(), Topic: "orders"})...)
	msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "orders"}) // untraced
	inner := &fakePub{}
	pub := outboxotel.Publisher(inner, &outboxotel.Config{TracerProvider: rec.tp, System: "nats"})
	for i, err := range pub.Publish(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	s := rec.one(t, "outbox publish orders")
	if s.SpanKind != trace.SpanKindProducer || s.Parent.IsValid() {
		t.Errorf("kind %v, parent %v: want a root Producer span", s.SpanKind, s.Parent)
	}
	if s.Status.Code != codes.Unset {
		t.Errorf("status %+v, want unset", s.Status)
	}
	checkAttrs(t, s, map[string]string{"messaging.system": "nats", "messaging.destination.name": "orders",
		"messaging.operation.type": "send", "messaging.operation.name": "publish", "messaging.batch.message_count": "3"})
	if len(s.Links) != 2 {
		t.Fatalf("%d links, want 2 (the traced messages): %+v", len(s.Links), s.Links)
	}
	for i, w := range []trace.Span{a, b} {
		l := s.Links[i]
		if !l.SpanContext.Equal(w.SpanContext()) && (l.SpanContext.SpanID() != w.SpanContext().SpanID() || l.SpanContext.TraceID() != w.SpanContext().TraceID()) {
			t.Errorf("link %d to %v, want writer %v", i, l.SpanContext, w.SpanContext())
		}
		if len(l.Attributes) != 1 || l.Attributes[0].Value.AsString() != msgs[i].ID.String() {
			t.Errorf("link %d attributes %v, want messaging.message.id %s", i, l.Attributes, msgs[i].ID)
		}
	}
	// The publisher got the messages as they were, in the publish span.
	if len(inner.got) != 3 || inner.got[0].Headers["traceparent"] != msgs[0].Headers["traceparent"] {
		t.Fatalf("publisher got %+v", inner.got)
	}
	if trace.SpanContextFromContext(inner.ctx).SpanID() != s.SpanContext.SpanID() {
		t.Error("the wrapped Publish did not run in the publish span")
	}

	// One message: its ID; several topics: no destination.
	rec.exp.Reset()
	pub.Publish(context.Background(), msgs[:1])
	checkAttrs(t, rec.one(t, "outbox publish orders"), map[string]string{"messaging.message.id": msgs[0].ID.String()})
	rec.exp.Reset()
	pub.Publish(context.Background(), []outbox.Message{{ID: outbox.NewID(), Topic: "a"}, {ID: outbox.NewID(), Topic: "b"}})
	s = rec.one(t, "outbox publish")
	for _, kv := range s.Attributes {
		if kv.Key == "messaging.destination.name" {
			t.Errorf("a batch of two topics has messaging.destination.name %q", kv.Value.AsString())
		}
	}
}

// Failures: an exception event per failed message, the count, the first
// one's class, status Error; the results come back unchanged.
func TestPublisherErrors(t *testing.T) {
	rec := newRecorder(t)
	down := publishers.Unavailable(errors.New("connection refused"))
	big := publishers.Permanent(errors.New("too large"))
	inner := &fakePub{fail: map[int]error{1: down, 2: big}}
	pub := outboxotel.Publisher(inner, &outboxotel.Config{TracerProvider: rec.tp})
	msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "t"}, {ID: outbox.NewID(), Topic: "t"}, {ID: outbox.NewID(), Topic: "t"}}
	errs := pub.Publish(context.Background(), msgs)
	if errs[0] != nil || errs[1] != down || errs[2] != big { //nolint:errorlint // the publisher's errors themselves, unwrapped
		t.Fatalf("results %v, want the wrapped publisher's", errs)
	}
	s := rec.one(t, "outbox publish t")
	if s.Status.Code != codes.Error {
		t.Errorf("status %+v, want Error", s.Status)
	}
	checkAttrs(t, s, map[string]string{"error.type": "unavailable", "outbox.publish.failed_count": "2"})
	if !hasException(s, down.Error()) || !hasException(s, big.Error()) {
		t.Errorf("events %+v, want an exception per failure", s.Events)
	}
	for _, e := range s.Events {
		id := ""
		for _, a := range e.Attributes {
			if a.Key == "messaging.message.id" {
				id = a.Value.AsString()
			}
		}
		if id != msgs[1].ID.String() && id != msgs[2].ID.String() {
			t.Errorf("event %q names message %q, want a failed one", e.Name, id)
		}
	}
}

// Off (the global default provider, or a no-op one): no span in the
// wrapped Publish's context, the messages untouched.
func TestPublisherOff(t *testing.T) {
	for name, cfg := range map[string]*outboxotel.Config{
		"global default": nil,
		"noop":           {TracerProvider: noop.NewTracerProvider()},
	} {
		inner := &fakePub{}
		msgs := []outbox.Message{{ID: outbox.NewID(), Topic: "t"}}
		outboxotel.Publisher(inner, cfg).Publish(context.Background(), msgs)
		if trace.SpanFromContext(inner.ctx).SpanContext().IsValid() || &inner.got[0] != &msgs[0] {
			t.Errorf("%s: the wrapped Publish got a span or other messages", name)
		}
	}
}

// MaxLinks caps the links of a call; a negative one does not.
func TestPublisherMaxLinks(t *testing.T) {
	rec := newRecorder(t)
	ctx, w := rec.tp.Tracer("test").Start(context.Background(), "writer")
	w.End()
	msgs := make([]outbox.Message, 200)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "t"}
	}
	msgs = outboxotel.Inject(ctx, msgs...)
	for _, c := range []struct{ max, want int }{{0, outboxotel.DefaultMaxLinks}, {3, 3}, {-1, 200}} {
		rec.exp.Reset()
		outboxotel.Publisher(&fakePub{}, &outboxotel.Config{TracerProvider: rec.tp, MaxLinks: c.max}).Publish(context.Background(), msgs)
		s := rec.one(t, "outbox publish t")
		if got := len(s.Links) + s.DroppedLinks; got != c.want {
			t.Errorf("MaxLinks %d: %d links (%d dropped by the SDK), want %d", c.max, len(s.Links), s.DroppedLinks, c.want)
		}
	}
}
