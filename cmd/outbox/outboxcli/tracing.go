package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/outboxgo/outbox/internal/redact"
	outboxotel "github.com/outboxgo/outbox/otel"
	"github.com/outboxgo/outbox/publishers"
)

// defaultServiceName is the service.name of the relay's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const defaultServiceName = "outbox-relay"

// tracingShutdownTimeout bounds the flush of the spans left at exit.
const tracingShutdownTimeout = 10 * time.Second

// OTLP protocols, the values of OTEL_EXPORTER_OTLP_PROTOCOL.
const (
	protoHTTP = "http/protobuf"
	protoGRPC = "grpc"
	protoJSON = "http/json"
)

// tracing is the relay's OpenTelemetry export (--otel): a tracer provider
// whose spans go to an OTLP endpoint.
type tracing struct {
	tp *sdktrace.TracerProvider
	// prop reads each event's stored trace context (OTEL_PROPAGATORS);
	// nil: outboxotel's default, W3C Trace Context.
	prop propagation.TextMapPropagator
	// where says where the spans go, for the start line, redacted.
	where string
}

// propagators is what OTEL_PROPAGATORS names, the formats the writers
// store the trace context in (tracecontext, baggage, b3, b3multi, jaeger,
// xray, ottrace, none; comma-separated); nil when it is unset, for
// outboxotel's default, W3C Trace Context alone.
func propagators() (propagation.TextMapPropagator, error) {
	v := strings.TrimSpace(os.Getenv("OTEL_PROPAGATORS"))
	if v == "" {
		return nil, nil
	}
	var names []string
	for n := range strings.SplitSeq(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	p, err := autoprop.TextMapPropagator(names...)
	if err != nil {
		return nil, fmt.Errorf("OTEL_PROPAGATORS=%q: %v; known: tracecontext, baggage, b3, b3multi, jaeger, xray, ottrace, none", v, err)
	}
	return p, nil
}

// otlpProtocol is the OTLP protocol the environment asks for: the
// traces-specific variable first, then the general one, then the
// specification's default (http/protobuf).
func otlpProtocol() (string, error) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		v := strings.TrimSpace(os.Getenv(name))
		switch v {
		case "":
			continue
		case protoHTTP, protoGRPC:
			return v, nil
		case protoJSON:
			return "", fmt.Errorf("%s=%s: the Go OTLP exporter does not speak it; want %s or %s", name, v, protoHTTP, protoGRPC)
		}
		return "", fmt.Errorf("%s=%q: want %s or %s", name, v, protoHTTP, protoGRPC)
	}
	return protoHTTP, nil
}

// otlpEndpoint says where the exporter sends spans, as the exporter reads
// the environment, with its secrets hidden.
func otlpEndpoint(proto string) string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return redact.URL(v)
		}
	}
	if proto == protoGRPC {
		return "https://localhost:4317"
	}
	return "https://localhost:4318/v1/traces"
}

// tracingOff reports why the environment turns tracing off, or "".
func tracingOff() string {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return "OTEL_SDK_DISABLED=true"
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")), "none") {
		return "OTEL_TRACES_EXPORTER=none"
	}
	return ""
}

// checkTracing validates what --otel reads from the environment, before
// the relay connects to anything.
func checkTracing() error {
	if tracingOff() != "" {
		return nil
	}
	if _, err := otlpProtocol(); err != nil {
		return err
	}
	if _, err := propagators(); err != nil {
		return err
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("%s=%q: want a URL such as http://127.0.0.1:4318", name, redact.URL(v))
		}
	}
	return nil
}

// startTracing makes the OTLP exporter and the tracer provider of --otel.
// The exporter reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout,
// TLS, compression) itself, the SDK OTEL_TRACES_SAMPLER, OTEL_BSP_* and
// OTEL_SPAN_*_LIMIT, and the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES; this picks the protocol (OTEL_EXPORTER_OTLP_PROTOCOL)
// and routes the SDK's errors to log, redacted. It returns nil when the
// environment turns tracing off (OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none).
func startTracing(ctx context.Context, log *slog.Logger) (*tracing, error) {
	if why := tracingOff(); why != "" {
		log.Info("--otel: tracing is off", "because", why)
		return nil, nil
	}
	proto, err := otlpProtocol()
	if err != nil {
		return nil, err
	}
	prop, err := propagators()
	if err != nil {
		return nil, err
	}
	otelapi.SetErrorHandler(otelapi.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export failed", "error", redact.Text(err.Error()))
	}))
	var exp sdktrace.SpanExporter
	if proto == protoGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("--otel: the OTLP exporter: %s", redact.Text(err.Error()))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(defaultServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: they win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("--otel: the resource: %s", redact.Text(err.Error()))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &tracing{tp: tp, prop: prop, where: "OTLP " + proto + " to " + otlpEndpoint(proto)}, nil
}

// wrap returns pub starting a span per Publish, exported by t, with
// messaging.system named after the broker's URL scheme.
func (t *tracing) wrap(pub publishers.Publisher, scheme string) publishers.Publisher {
	return outboxotel.Publisher(pub, &outboxotel.Config{TracerProvider: t.tp, Propagator: t.prop, System: messagingSystem(scheme)})
}

// shutdown flushes the spans not yet exported and stops the exporter.
func (t *tracing) shutdown(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
	defer cancel()
	if err := t.tp.Shutdown(ctx); err != nil {
		log.Warn("flushing the last spans failed", "error", redact.Text(err.Error()))
	}
}

// brokerScheme is the scheme of a --broker-url ("" for the embedded
// broker).
func brokerScheme(rawURL string) string {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ""
	}
	return strings.ToLower(scheme)
}

// messagingSystem is the messaging.system attribute for a broker URL
// scheme: the semantic conventions' name where they have one, the
// project's otherwise.
func messagingSystem(scheme string) string {
	switch scheme {
	case "", "nats":
		return "nats" // "": the embedded broker
	case "amqp", "amqps":
		return "rabbitmq"
	case "kafka", "kafka+tls":
		return "kafka"
	case "pubsub":
		return "gcp_pubsub"
	case "sqs":
		return "aws_sqs"
	case "sns":
		return "aws_sns"
	case "redis", "rediss":
		return "redis"
	case "mqtt", "mqtts":
		return "mqtt"
	case "http", "https":
		return "webhook"
	case "sidekiq", "sidekiq+redis", "sidekiq+rediss":
		return "sidekiq"
	}
	return scheme
}
