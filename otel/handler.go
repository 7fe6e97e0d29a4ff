package otel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/outboxgo/outbox/inbox"
)

// Attributes of the process span besides the semantic conventions'.
const (
	// DeliveryKey is the message's delivery count (inbox.Message.Delivery),
	// when the broker gives one.
	DeliveryKey = attribute.Key("outbox.message.delivery")
	// TypeKey is the message's Type, when it has one.
	TypeKey = attribute.Key("outbox.message.type")
)

// Handler returns h running in a span of kind Consumer named
// "outbox process <topic>", the child of the trace context the message
// carries in its headers (the writer's, see Inject): the consumer's
// effect joins the trace of the request that enqueued the event. A
// message without one, or with one that does not parse, gets a span in
// the trace of ctx (a new trace, as subscribers call it). The span
// records h's error (and a panic, which goes on up) and ends when h
// returns, before the inbox's transaction commits.
//
// Pass the result to any subscriber, in place of h: every subscriber
// calls its handler through inbox.Inbox.Handle. cfg may be nil.
//
// With a no-op TracerProvider (OpenTelemetry's global default, until the
// program sets one) h runs with ctx as it is, at the cost of a check: the
// message's trace context is not extracted either.
func Handler[TTx any](h inbox.Handler[TTx], cfg *Config) inbox.Handler[TTx] {
	r := cfg.resolve()
	return func(ctx context.Context, tx TTx, msg inbox.Message) (err error) {
		if r.off() {
			return h(ctx, tx, msg)
		}
		if has(msg.Headers, r.fields) {
			ctx = r.prop.Extract(ctx, carrier(msg.Headers))
		}
		ctx, span := r.tracer.Start(ctx, processName, consumerKind...)
		if !span.IsRecording() {
			span.End()
			return h(ctx, tx, msg)
		}
		if msg.Topic != "" {
			span.SetName(processName + " " + msg.Topic)
		}
		attrs := []attribute.KeyValue{r.system, opProcess, typeProcess,
			semconv.MessagingDestinationNameKey.String(msg.Topic),
			semconv.MessagingMessageIDKey.String(msg.ID.String())}
		if msg.Delivery > 0 {
			attrs = append(attrs, DeliveryKey.Int(msg.Delivery))
		}
		if msg.Type != "" {
			attrs = append(attrs, TypeKey.String(msg.Type))
		}
		span.SetAttributes(attrs...)
		defer func() {
			if p := recover(); p != nil {
				span.SetStatus(codes.Error, fmt.Sprintf("handler panicked: %v", p))
				span.End()
				panic(p)
			}
			if err != nil {
				class := "_OTHER"
				if inbox.IsPermanent(err) {
					class = "permanent"
				}
				span.RecordError(err)
				span.SetAttributes(semconv.ErrorTypeKey.String(class))
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
		return h(ctx, tx, msg)
	}
}
