package outboxcli_test

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/propagators/autoprop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxotel "github.com/outboxgo/outbox/otel"
)

// otlpReceiver is an OTLP trace receiver, over HTTP (each
// ExportTraceServiceRequest posted to /v1/traces, as protobuf) or gRPC: it
// keeps the spans with their resource's attributes, and the requests'
// headers.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	// endpoint is OTEL_EXPORTER_OTLP_ENDPOINT's value for it.
	endpoint string

	mu       sync.Mutex
	spans    []*tracepb.Span
	resource map[string]string
	headers  []http.Header
	bad      []string // requests it could not take
}

// startReceiver starts a receiver speaking protocol: http/protobuf or grpc.
func startReceiver(t *testing.T, protocol string) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{resource: map[string]string{}}
	if protocol == "grpc" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		coltracepb.RegisterTraceServiceServer(srv, rc)
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(srv.Stop)
		rc.endpoint = "http://" + ln.Addr().String() // http: without TLS
		return rc
	}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	rc.endpoint = srv.URL
	return rc
}

// Export implements the gRPC TraceServiceServer.
func (rc *otlpReceiver) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := http.Header{}
	for _, v := range md.Get("authorization") {
		h.Add("Authorization", v)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.keep(req, h)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// keep records req; rc.mu is held.
func (rc *otlpReceiver) keep(req *coltracepb.ExportTraceServiceRequest, h http.Header) {
	rc.headers = append(rc.headers, h)
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			rc.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		rc.bad = append(rc.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+errString(err))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rc.keep(&req, r.Header.Clone())
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			if v := kv.GetValue(); v.GetStringValue() != "" {
				return v.GetStringValue()
			}
			return kv.GetValue().String()
		}
	}
	return ""
}

// outbox relay --otel exports a Producer span per publish to the OTLP
// endpoint of the standard environment, linked to the trace context the
// enqueuing request stored in each event's headers; the broker's message
// carries that context on; the spans are flushed when the relay stops; the
// exporter's headers (a secret) are sent and never printed. Over both
// protocols of OTEL_EXPORTER_OTLP_PROTOCOL, and with writers that store B3
// headers (Zipkin's) and a relay told so by OTEL_PROPAGATORS.
func TestRelayExportsTraces(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) { testRelayExportsTraces(t, protocol, "") })
	}
	t.Run("b3", func(t *testing.T) { testRelayExportsTraces(t, "http/protobuf", "b3") })
}

// testRelayExportsTraces runs the relay with OTEL_PROPAGATORS set to
// propagators (unset when empty) after writers stored their trace context
// with that propagator.
func testRelayExportsTraces(t *testing.T, protocol, propagators string) {
	e := newPG(t)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	rc := startReceiver(t, protocol)

	// The writer's request span, the context Enqueue stores.
	writerTP := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = writerTP.Shutdown(context.Background()) })
	ctx, span := writerTP.Tracer("app").Start(context.Background(), "POST /orders")
	writer := span.SpanContext()
	span.End()
	var msgs []outbox.Message
	ids := map[string]bool{}
	for range 3 {
		id := uuid.Must(uuid.NewV7())
		ids[id.String()] = true
		msgs = append(msgs, outbox.Message{ID: id, Topic: "orders", Payload: []byte(`{}`)})
	}
	header := "traceparent" // the header that carries the trace ID on
	if propagators == "" {
		msgs = outboxotel.Inject(ctx, msgs...)
	} else {
		prop, err := autoprop.TextMapPropagator(propagators)
		if err != nil {
			t.Fatal(err)
		}
		msgs = (&outboxotel.Config{Propagator: prop}).Inject(ctx, msgs...)
		header = prop.Fields()[0]
		t.Setenv("OTEL_PROPAGATORS", propagators)
	}
	if err := e.enqueueTx(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}

	// User-info in the endpoint is a secret too (the exporter ignores it).
	endpoint := strings.Replace(rc.endpoint, "://", "://collector:s3cret@", 1)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret-token")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
	t.Setenv("OTEL_SERVICE_NAME", "orders-relay")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// No export before the relay stops: the spans must come from the
	// flush at shutdown.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")

	var stdout, stderr logtest.Buffer
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- outboxcli.Main(rctx, append([]string{"relay", "--otel", "--broker-url", natstest.URL(),
			"--subject-prefix", prefix, "--poll-interval", "50ms"}, e.db...), &stdout, &stderr)
	}()
	got := natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 3, time.Minute)
	for _, m := range got {
		if tp := m.Headers().Get(header); !strings.Contains(tp, writer.TraceID().String()) {
			t.Errorf("the broker's message %s carries %s %q, want the writer's trace %s", m.Subject(), header, tp, writer.TraceID())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("relay exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(out, "exporting traces") || !strings.Contains(out, "OTLP "+protocol+" to "+strings.Replace(endpoint, "s3cret", "xxxxx", 1)) {
		t.Errorf("no start line naming the OTLP endpoint:\n%s", out)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the output leaks the exporter's headers:\n%s", out)
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Errorf("the receiver refused: %q", rc.bad)
	}
	if len(rc.headers) == 0 || rc.headers[0].Get("Authorization") != "Bearer s3cret-token" {
		t.Errorf("the receiver got %d requests, want some with OTEL_EXPORTER_OTLP_HEADERS's Authorization", len(rc.headers))
	}
	if rc.resource["service.name"] != "orders-relay" || rc.resource["deployment.environment.name"] != "test" {
		t.Errorf("resource %v, want service.name orders-relay and deployment.environment.name test", rc.resource)
	}
	linked := map[string]bool{}
	for _, s := range rc.spans {
		if s.GetName() != "outbox publish orders" || s.GetKind() != tracepb.Span_SPAN_KIND_PRODUCER {
			t.Errorf("span %q kind %v, want \"outbox publish orders\", a producer", s.GetName(), s.GetKind())
			continue
		}
		if sys := attr(s.GetAttributes(), "messaging.system"); sys != "nats" {
			t.Errorf("span %q: messaging.system %q, want nats", s.GetName(), sys)
		}
		if hex.EncodeToString(s.GetTraceId()) == writer.TraceID().String() {
			t.Errorf("the publish span is in the writer's trace: it should link to it, not continue it")
		}
		for _, l := range s.GetLinks() {
			if hex.EncodeToString(l.GetTraceId()) != writer.TraceID().String() || hex.EncodeToString(l.GetSpanId()) != writer.SpanID().String() {
				t.Errorf("a link to %x/%x, want the writer's span %s/%s", l.GetTraceId(), l.GetSpanId(), writer.TraceID(), writer.SpanID())
				continue
			}
			linked[attr(l.GetAttributes(), "messaging.message.id")] = true
		}
	}
	if len(rc.spans) == 0 {
		t.Fatalf("no span reached the receiver:\n%s", out)
	}
	for id := range ids {
		if !linked[id] {
			t.Errorf("event %s: no publish span links to its writer's span (linked: %v)", id, linked)
		}
	}
}

// --otel refuses, in one line, an OTLP protocol or endpoint it cannot use,
// before connecting to anything.
func TestRelayOTelBadEnvironment(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/app.db"
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	failsWith(t, []string{"relay", "--database-url", url, "--otel"}, "--otel", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json", "http/protobuf or grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	failsWith(t, []string{"relay", "--database-url", url, "--otel"}, "--otel", "carrier-pigeon")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:s3cret@nowhere")
	failsWith(t, []string{"relay", "--database-url", url, "--otel"}, "--otel", "OTEL_EXPORTER_OTLP_ENDPOINT", "want a URL")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_PROPAGATORS", "tracecontext,zipkin")
	failsWith(t, []string{"relay", "--database-url", url, "--otel"}, "--otel", "OTEL_PROPAGATORS", "zipkin", "known: tracecontext")
	// Without --otel the environment is not read.
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	failsWith(t, []string{"relay", "--database-url", url, "--batch-size", "0"}, "--batch-size")
}
