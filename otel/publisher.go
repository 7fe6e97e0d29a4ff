package otel

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// Publisher returns pub starting a span for each Publish call: kind
// Producer, named "outbox publish <topic>" ("outbox publish" when the
// call's messages have several topics), linked to the trace context each
// message carries in its headers (the writer's span, see Inject), with
// the semantic conventions' messaging attributes and the failures
// recorded. The messages go to pub unchanged: their headers carry the
// writer's context on to the consumer.
//
// Links are capped at Config.MaxLinks per call (default 128).
//
// The result implements publishers.Checker and publishers.OrderKeeper
// exactly when pub does, forwarding to it. cfg may be nil.
//
// With a no-op TracerProvider (OpenTelemetry's global default, until the
// program sets one) a Publish costs a check and allocates nothing; when
// the span is sampled out, it costs one span start, whatever the number
// of messages.
func Publisher(pub publishers.Publisher, cfg *Config) publishers.Publisher {
	p := &publisher{pub: pub, r: cfg.resolve()}
	c, isChecker := pub.(publishers.Checker)
	o, isKeeper := pub.(publishers.OrderKeeper)
	switch {
	case isChecker && isKeeper:
		return &checkingKeeper{p, c, o}
	case isChecker:
		return &checking{p, c}
	case isKeeper:
		return &keeping{p, o}
	}
	return p
}

// The wrapper's shapes: each implements what the wrapped publisher does.
type (
	checking struct {
		*publisher
		publishers.Checker
	}
	keeping struct {
		*publisher
		publishers.OrderKeeper
	}
	checkingKeeper struct {
		*publisher
		publishers.Checker
		publishers.OrderKeeper
	}
)

type publisher struct {
	pub publishers.Publisher
	r   *resolved
}

// Close closes the wrapped publisher.
func (p *publisher) Close() error { return p.pub.Close() }

// Unwrap returns the wrapped publisher.
func (p *publisher) Unwrap() publishers.Publisher { return p.pub }

// Publish publishes msgs through the wrapped publisher in a Producer span.
func (p *publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	if len(msgs) == 0 || p.r.off() {
		return p.pub.Publish(ctx, msgs)
	}
	sctx, span := p.r.tracer.Start(ctx, publishName, producerKind...)
	if !span.IsRecording() {
		span.End()
		return p.pub.Publish(ctx, msgs)
	}
	defer span.End()
	p.describe(span, msgs)
	errs := p.pub.Publish(sctx, msgs)
	recordFailures(span, msgs, errs)
	return errs
}

// describe names span and sets its attributes and links.
func (p *publisher) describe(span trace.Span, msgs []outbox.Message) {
	topic := msgs[0].Topic
	for _, m := range msgs[1:] {
		if m.Topic != topic {
			topic = ""
			break
		}
	}
	attrs := []attribute.KeyValue{p.r.system, opPublish, typeSend}
	if topic != "" {
		span.SetName(publishName + " " + topic)
		attrs = append(attrs, semconv.MessagingDestinationNameKey.String(topic))
	}
	if len(msgs) == 1 {
		attrs = append(attrs, semconv.MessagingMessageIDKey.String(msgs[0].ID.String()))
	} else {
		attrs = append(attrs, semconv.MessagingBatchMessageCountKey.Int(len(msgs)))
	}
	span.SetAttributes(attrs...)
	links := 0
	for _, m := range msgs {
		if p.r.maxLinks >= 0 && links >= p.r.maxLinks {
			break
		}
		if !has(m.Headers, p.r.fields) {
			continue
		}
		sc := trace.SpanContextFromContext(p.r.prop.Extract(context.Background(), carrier(m.Headers)))
		if !sc.IsValid() {
			continue
		}
		links++
		span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
			semconv.MessagingMessageIDKey.String(m.ID.String()),
		}})
	}
}

// FailedCountKey is the attribute that counts a Publish call's failed
// messages, set when one failed.
const FailedCountKey = attribute.Key("outbox.publish.failed_count")

// recordFailures records each failed message as an exception event naming
// its ID, and sets the span's status to Error when one failed.
func recordFailures(span trace.Span, msgs []outbox.Message, errs []error) {
	failed := 0
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if failed == 0 {
			first = err
		}
		failed++
		opts := []trace.EventOption{}
		if i < len(msgs) {
			opts = append(opts, trace.WithAttributes(semconv.MessagingMessageIDKey.String(msgs[i].ID.String())))
		}
		span.RecordError(err, opts...)
	}
	if len(errs) != len(msgs) {
		span.SetStatus(codes.Error, fmt.Sprintf("the publisher returned %d results for %d messages", len(errs), len(msgs)))
		return
	}
	if failed == 0 {
		return
	}
	span.SetAttributes(FailedCountKey.Int(failed), semconv.ErrorTypeKey.String(errorClass(first)))
	span.SetStatus(codes.Error, fmt.Sprintf("%d of %d messages failed, the first: %v", failed, len(msgs), first))
}

// errorClass is the error.type of a publish error: its class.
func errorClass(err error) string {
	switch {
	case publishers.IsMisconfigured(err):
		return "misconfigured"
	case publishers.IsUnavailable(err):
		return "unavailable"
	case publishers.IsPermanent(err):
		return "permanent"
	}
	return "_OTHER"
}
