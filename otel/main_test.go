package otel_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The examples need no service; the NATS test skips without one.
	goleak.VerifyTestMain(m)
}

// recorder is a tracer provider that keeps every ended span in memory.
type recorder struct {
	tp  *trace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newRecorder(t testing.TB) *recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := trace.NewTracerProvider(trace.WithSyncer(exp), trace.WithSampler(trace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &recorder{tp: tp, exp: exp}
}

// named returns the ended spans named name.
func (r *recorder) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span named name, failing the test otherwise.
func (r *recorder) one(t testing.TB, name string) tracetest.SpanStub {
	t.Helper()
	s := r.named(name)
	if len(s) != 1 {
		var names []string
		for _, x := range r.exp.GetSpans() {
			names = append(names, x.Name)
		}
		t.Fatalf("%d spans named %q, want 1; spans: %q", len(s), name, names)
	}
	return s[0]
}
