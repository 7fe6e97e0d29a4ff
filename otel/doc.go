// Package otel traces events through the outbox with OpenTelemetry: one
// trace from the request that enqueued an event to the consumer's effect.
// Only this module imports OpenTelemetry; the outbox, the relay, the
// stores, the publishers and the subscribers know nothing of it, and a
// program that does not import this package pays nothing.
//
// Import it as outboxotel, beside OpenTelemetry's own otel package:
//
//	import outboxotel "github.com/outboxgo/outbox/otel"
//
// # Wiring
//
// Three wrappers, one per side, each taking an optional *Config (tracer
// provider, propagator, messaging.system):
//
//	// The writer: the caller's trace context goes into the event's
//	// headers (traceparent, tracestate), in the business transaction.
//	err := ob.Enqueue(ctx, tx, outboxotel.Inject(ctx, msg)...)
//	// or, for every Enqueue: ob := outbox.New(outboxotel.Driver(db, nil), nil)
//
//	// The relay: a Producer span per Publish call, linked to each
//	// event's trace context.
//	r, err := relay.New(db.Store(), outboxotel.Publisher(pub, cfg), nil)
//
//	// The consumer: a Consumer span per message, the child of the
//	// event's trace context, around the handler.
//	sub, err := nats.NewSubscriber(js, in, outboxotel.Handler(handle, cfg), subCfg)
//
// # Spans, links and parents
//
// The trace context stored with an event is the writer's: the span
// current in ctx at Enqueue (an HTTP server span, say). It is stored in
// the event's headers, as JSON in every store, and every publisher copies
// headers to the broker, so the consumer receives it unchanged.
//
// The relay's span ("outbox publish <topic>", kind Producer) covers one
// Publish call, a batch of up to relay.Config.BatchSize events or a single
// keyed event; it is a child of the relay's context (usually a root: a
// trace of its own) and links to each event's stored context, with the
// event's messaging.message.id on the link. It does not rewrite the
// events' headers: a batch mixes events of many traces, so, as the
// OpenTelemetry messaging conventions prescribe, the consumer sees the
// event's creation context (the writer's), not the publish span.
//
// The consumer's span ("outbox process <topic>", kind Consumer) is the
// child of the context the event carries: its trace ID is the writer's,
// its parent the writer's span (remote). It covers the handler, inside
// the inbox's transaction, and records the handler's error.
//
// # Attributes
//
// Both spans carry messaging.system (Config.System), messaging.operation.name
// ("publish", "process"), messaging.operation.type ("send", "process") and
// messaging.destination.name (the outbox topic, before any publisher's
// mapping to a subject or stream; left out of a publish span whose batch
// has several topics). A single-message publish and every process span
// carry messaging.message.id (the event ID); a batch publish carries
// messaging.batch.message_count. A publish with failures gets an
// "exception" event per failed message (with its ID), error.type (the
// first failure's class: unavailable, misconfigured, permanent, _OTHER),
// outbox.publish.failed_count and status Error. A process span carries
// outbox.message.delivery and outbox.message.type when known.
//
// # Cost when off
//
// With a no-op TracerProvider (OpenTelemetry's global default, until the
// program calls otel.SetTracerProvider, or noop.NewTracerProvider) the
// wrappers check that and step aside: no span, no header parsing, no
// allocation (BenchmarkPublish: a 1,000-message Publish allocates
// nothing more than unwrapped, and takes a few nanoseconds more). Inject
// of a context without a span returns its argument. A span the SDK
// samples out costs one span start per Publish call, or per message.
//
// # Limits
//
// OpenTelemetry's SDK keeps 128 links and 128 events per span by default
// (sdktrace.SpanLimits): a batch of 1,000 events keeps the links of the
// first 128 and counts the rest as dropped; Config.MaxLinks (default 128)
// stops adding links past it. Names of propagated headers
// are matched in any case (some hops turn traceparent into Traceparent).
package otel
