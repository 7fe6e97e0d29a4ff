// Package otel tests the otel module across a real store, relay and
// broker (PostgreSQL, NATS JetStream); the module's own tests need no
// service, so its users get no database or broker client from it.
package otel

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	outboxnats "github.com/outboxgo/outbox/nats"
	outboxotel "github.com/outboxgo/outbox/otel"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/subscribers"
)

// One trace from a request to the consumer's effect, across PostgreSQL,
// the real relay and NATS JetStream: the request enqueues an event with
// its trace context, the relay's publish span links to it, and the
// subscriber's handler runs in its child, in the request's trace, and
// commits its effect.
func TestTraceAcrossNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rec := newRecorder(t)
	cfg := &outboxotel.Config{TracerProvider: rec.tp, System: "nats"}

	pool := pgtest.Pool(t)
	nc := natstest.Connect(t)
	if pool == nil || nc == nil {
		return
	}
	prefix, stream := natstest.NewStream(t, nc)
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	effects := pgx.Identifier{schema, "effects"}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+effects+` (id uuid PRIMARY KEY, trace_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	// The request: a server span, an event enqueued in its transaction.
	ob := outbox.New(db, nil)
	reqCtx, req := rec.tp.Tracer("api").Start(ctx, "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	id := outbox.NewID()
	err = pgx.BeginFunc(reqCtx, pool, func(tx pgx.Tx) error {
		return ob.Enqueue(reqCtx, tx, outboxotel.Inject(reqCtx, outbox.Message{ID: id, Topic: "orders", Payload: []byte(`{}`)})...)
	})
	req.End()
	if err != nil {
		t.Fatal(err)
	}

	// The consumer: the NATS subscriber, an inbox in PostgreSQL, the
	// wrapped handler recording the trace it ran in.
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+effects+` (id, trace_id) VALUES ($1, $2)`,
			msg.ID, trace.SpanContextFromContext(ctx).TraceID().String())
		return err
	}
	committed := make(chan inbox.Message, 8)
	js := natstest.JetStream(t, nc)
	sub, err := outboxnats.NewSubscriber(js, in, outboxotel.Handler(handle, cfg), &outboxnats.SubscriberConfig{
		Options: subscribers.Options{Hooks: subscribers.Hooks{
			AfterCommit: func(m inbox.Message, _ inbox.Outcome) { committed <- m },
		}},
		Stream: stream, Durable: "traced", SubjectPrefix: prefix,
		FilterSubjects: []string{prefix + ".orders"}, DeadLetterSubject: prefix + ".dead",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sub.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	// The relay, with the wrapped NATS publisher.
	pub, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan []error, 8)
	r, err := relay.New(db.Store(), outboxotel.Publisher(pub, cfg), &relay.Config{
		Hooks: relay.Hooks{AfterPublish: func(_ []outbox.Message, errs []error) { published <- errs }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		_ = pub.Close()
	}()

	// Wait for the publish (its span ended before the hook) and the
	// consumer's commit (its span ended before the commit).
	for pubDone, subDone := false, false; !pubDone || !subDone; {
		select {
		case errs := <-published:
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("publish: %v", err)
			}
			pubDone = true
		case m := <-committed:
			if m.ID != id {
				t.Fatalf("committed %s, want %s", m.ID, id)
			}
			subDone = true
		case <-ctx.Done():
			t.Fatalf("publish seen %v, commit seen %v, before the deadline", pubDone, subDone)
		}
	}

	w := rec.one(t, "POST /orders")
	p := rec.named("outbox publish orders")
	h := rec.named("outbox process orders")
	if len(p) == 0 || len(h) == 0 {
		t.Fatalf("%d publish and %d process spans, want at least one each", len(p), len(h))
	}
	traceID := w.SpanContext.TraceID()
	// The publish span: Producer, linked to the writer's span.
	if p[0].SpanKind != trace.SpanKindProducer || !linksTo(p[0], w) {
		t.Errorf("publish span: kind %v, links %+v; want a Producer linked to the request span %s",
			p[0].SpanKind, p[0].Links, w.SpanContext.SpanID())
	}
	checkAttrs(t, p[0], map[string]string{"messaging.system": "nats", "messaging.destination.name": "orders",
		"messaging.message.id": id.String()})
	// The process span: Consumer, the request span's child, in its trace.
	if h[0].SpanKind != trace.SpanKindConsumer || h[0].SpanContext.TraceID() != traceID ||
		h[0].Parent.SpanID() != w.SpanContext.SpanID() || !h[0].Parent.IsRemote() {
		t.Errorf("process span: kind %v, trace %s, parent %v; want a Consumer in trace %s, child of the request span %s",
			h[0].SpanKind, h[0].SpanContext.TraceID(), h[0].Parent, traceID, w.SpanContext.SpanID())
	}
	checkAttrs(t, h[0], map[string]string{"messaging.system": "nats", "messaging.destination.name": "orders",
		"messaging.message.id": id.String(), "outbox.message.delivery": "1"})
	// The effect committed, in the request's trace.
	var got string
	if err := pool.QueryRow(ctx, `SELECT trace_id FROM `+effects+` WHERE id = $1`, id).Scan(&got); err != nil {
		t.Fatalf("the handler's effect: %v", err)
	}
	if got != traceID.String() {
		t.Errorf("the handler ran in trace %s, want the request's %s", got, traceID)
	}
}

// linksTo reports whether s links to the span w.
func linksTo(s, w tracetest.SpanStub) bool {
	for _, l := range s.Links {
		if l.SpanContext.TraceID() == w.SpanContext.TraceID() && l.SpanContext.SpanID() == w.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

// recorder is a tracer provider that keeps every ended span in memory.
type recorder struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newRecorder(t testing.TB) *recorder {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
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

// checkAttrs checks that s has the attributes of want, as strings.
func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, a := range s.Attributes {
		got[a.Key] = a.Value.String()
	}
	for k, v := range want {
		if got[attribute.Key(k)] != v {
			t.Errorf("span %q: attribute %s = %q, want %q (all: %v)", s.Name, k, got[attribute.Key(k)], v, fmt.Sprint(got))
		}
	}
}
