package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/outboxgo/outbox"
	outboxotel "github.com/outboxgo/outbox/otel"
	"github.com/outboxgo/outbox/publishers"
)

// nopPub acknowledges everything, allocating nothing.
type nopPub struct{ errs []error }

func (p *nopPub) Publish(_ context.Context, msgs []outbox.Message) []error { return p.errs[:len(msgs)] }
func (*nopPub) Close() error                                               { return nil }

// BenchmarkPublish publishes a batch of 1,000 traced messages to a no-op
// publisher: unwrapped, wrapped with tracing off (the global default
// provider, a no-op provider), and wrapped with a recording SDK provider
// (spans dropped by a discarding exporter).
func BenchmarkPublish(b *testing.B) {
	rec := newRecorder(b)
	ctx, span := rec.tp.Tracer("bench").Start(context.Background(), "writer")
	span.End()
	msgs := make([]outbox.Message, 1000)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders"}
	}
	msgs = outboxotel.Inject(ctx, msgs...)
	sdk := trace.NewTracerProvider(trace.WithSyncer(discard{}))
	b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	inner := &nopPub{errs: make([]error, len(msgs))}
	for _, c := range []struct {
		name string
		pub  publishers.Publisher
	}{
		{"unwrapped", inner},
		{"off-global", outboxotel.Publisher(inner, nil)},
		{"off-noop", outboxotel.Publisher(inner, &outboxotel.Config{TracerProvider: noop.NewTracerProvider()})},
		{"on-sdk", outboxotel.Publisher(inner, &outboxotel.Config{TracerProvider: sdk})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.pub.Publish(context.Background(), msgs)
			}
		})
	}
}

// discard is an exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []trace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                          { return nil }
