package otel_test

import (
	"context"
	"fmt"
	"log"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	outboxotel "github.com/outboxgo/outbox/otel"
)

// memPub is a broker in memory: it keeps what it is given.
type memPub struct{ msgs []outbox.Message }

func (p *memPub) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.msgs = append(p.msgs, msgs...)
	return make([]error, len(msgs))
}
func (*memPub) Close() error { return nil }

// A request enqueues an event with its trace context; the relay's publish
// span links to it; the consumer's handler runs in its child span, in
// the request's trace.
func Example() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	cfg := &outboxotel.Config{TracerProvider: tp, System: "memory"}

	// The writer: in a real service, ob.Enqueue(ctx, tx, outboxotel.Inject(ctx, msg)...).
	ctx, req := tp.Tracer("api").Start(context.Background(), "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	msgs := outboxotel.Inject(ctx, outbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte(`{"id":42}`)})
	req.End()

	// The relay: relay.New(db.Store(), outboxotel.Publisher(pub, cfg), nil).
	broker := &memPub{}
	pub := outboxotel.Publisher(broker, cfg)
	for _, err := range pub.Publish(context.Background(), msgs) {
		if err != nil {
			log.Fatal(err)
		}
	}

	// The consumer: nats.NewSubscriber(js, in, outboxotel.Handler(handle, cfg), …).
	handle := outboxotel.Handler(func(ctx context.Context, _ any, msg inbox.Message) error {
		fmt.Println("handling", msg.Topic, "in the request's trace:",
			trace.SpanContextFromContext(ctx).TraceID() == req.SpanContext().TraceID())
		return nil
	}, cfg)
	m := broker.msgs[0]
	if err := handle(context.Background(), nil, inbox.Message{ID: m.ID, Topic: m.Topic, Payload: m.Payload, Headers: m.Headers}); err != nil {
		log.Fatal(err)
	}

	for _, s := range exp.GetSpans() {
		fmt.Printf("%s (%s): parent is the request: %v, links to the request: %v\n", s.Name, s.SpanKind,
			s.Parent.SpanID() == req.SpanContext().SpanID(),
			len(s.Links) == 1 && s.Links[0].SpanContext.SpanID() == req.SpanContext().SpanID())
	}
	// Output:
	// handling orders in the request's trace: true
	// POST /orders (server): parent is the request: false, links to the request: false
	// outbox publish orders (producer): parent is the request: false, links to the request: true
	// outbox process orders (consumer): parent is the request: true, links to the request: false
}
