package otel

import (
	"fmt"
	"strings"

	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the spans this package starts.
const ScopeName = "github.com/outboxgo/outbox/otel"

// DefaultSystem is Config.System's default.
const DefaultSystem = "outbox"

// Config configures the wrappers. A nil *Config, or the zero value, is
// ready to use: every field documents its default.
type Config struct {
	// TracerProvider starts the spans. Default: OpenTelemetry's global
	// provider (go.opentelemetry.io/otel.GetTracerProvider), which is a
	// no-op until the program calls otel.SetTracerProvider, and forwards
	// to that provider from then on, even in wrappers built before.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into a message's headers and
	// reads it back. Default propagation.TraceContext{}: the W3C
	// traceparent and tracestate headers. (Not the global propagator,
	// which injects nothing until the program sets one.) The writer and
	// the consumer must use the same one.
	Propagator propagation.TextMapPropagator
	// System is the messaging.system attribute of every span: the broker,
	// in the semantic conventions' words ("kafka", "rabbitmq",
	// "gcp_pubsub", "aws_sqs", "aws_sns") or the project's ("nats",
	// "redis", "mqtt", "webhook", "sidekiq"). Default DefaultSystem
	// ("outbox").
	System string
	// MaxLinks caps the links of a publish span: the first MaxLinks
	// traced messages of a Publish call get one. Default DefaultMaxLinks
	// (128, the SDK's default link limit, past which it drops them
	// anyway); negative: no cap.
	MaxLinks int
}

// DefaultMaxLinks is Config.MaxLinks's default.
const DefaultMaxLinks = 128

// resolved is a Config with its defaults applied, ready for the hot path.
type resolved struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// traceContextOnly: prop is the W3C propagator alone, so a context
	// without a valid span context injects nothing.
	traceContextOnly bool
	fields           []string // prop.Fields()
	system           attribute.KeyValue
	maxLinks         int // < 0: no cap
	// global: the provider is OpenTelemetry's global one, looked up at
	// each call to tell whether the program has set one yet.
	global bool
	// noop: the provider is a no-op one.
	noop bool
}

// off reports whether the provider records nothing, so that a wrapper can
// skip even the span start: a no-op provider, or the global one before the
// program sets one. It allocates nothing.
func (r *resolved) off() bool {
	if r.global {
		tp := otelapi.GetTracerProvider()
		return isNoop(tp) || tp == unsetGlobal
	}
	return r.noop
}

// unsetGlobal is OpenTelemetry's global TracerProvider as it is before the
// program sets one (a no-op that forwards to the provider set later), or
// nil when another provider was set before this package's init ran.
var unsetGlobal = func() trace.TracerProvider {
	tp := otelapi.GetTracerProvider()
	// The type is the otel module's internal one; should it change, this
	// says "set", and the wrappers take the span-start path: correct, if
	// not free.
	if fmt.Sprintf("%T", tp) == "*global.tracerProvider" {
		return tp
	}
	return nil
}()

// isNoop reports whether tp is one of OpenTelemetry's no-op providers.
func isNoop(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case noop.TracerProvider, *noop.TracerProvider:
		return true
	}
	return false
}

func (c *Config) resolve() *resolved {
	var cfg Config
	if c != nil {
		cfg = *c
	}
	global := cfg.TracerProvider == nil
	if global {
		cfg.TracerProvider = otelapi.GetTracerProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	if cfg.System == "" {
		cfg.System = DefaultSystem
	}
	if cfg.MaxLinks == 0 {
		cfg.MaxLinks = DefaultMaxLinks
	}
	_, tc := cfg.Propagator.(propagation.TraceContext)
	fields := cfg.Propagator.Fields()
	for i, f := range fields {
		fields[i] = strings.ToLower(f)
	}
	return &resolved{
		tracer:           cfg.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		prop:             cfg.Propagator,
		traceContextOnly: tc,
		fields:           fields,
		system:           semconv.MessagingSystemKey.String(cfg.System),
		maxLinks:         cfg.MaxLinks,
		global:           global,
		noop:             !global && isNoop(cfg.TracerProvider),
	}
}

// Attribute values of the spans.
var (
	opPublish    = semconv.MessagingOperationNameKey.String("publish")
	opProcess    = semconv.MessagingOperationNameKey.String("process")
	typeSend     = semconv.MessagingOperationTypeSend
	typeProcess  = semconv.MessagingOperationTypeProcess
	producerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	consumerKind = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
)

// Span names: the operation, then the topic when there is one.
const (
	publishName = "outbox publish"
	processName = "outbox process"
)
