package otel

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxgo/outbox"
)

// Inject returns msgs with the trace context of ctx in their headers
// (traceparent, and tracestate when ctx has one), for Outbox.Enqueue:
//
//	err := ob.Enqueue(ctx, tx, outboxotel.Inject(ctx, msg)...)
//
// It uses the W3C propagator; Config.Inject takes another. It never
// modifies msgs or their header maps: a message that gets headers gets a
// map of its own. A message that carries a trace context already (a
// traceparent header, in any case) keeps it. When ctx holds no valid span
// context it returns msgs itself, at no cost.
func Inject(ctx context.Context, msgs ...outbox.Message) []outbox.Message {
	return defaultInjector.inject(ctx, msgs)
}

// defaultInjector is Inject's: the W3C propagator.
var defaultInjector = (*Config)(nil).resolve()

// Inject is the package's Inject with c's Propagator. Build the Config
// once; Inject resolves its defaults at each call.
func (c *Config) Inject(ctx context.Context, msgs ...outbox.Message) []outbox.Message {
	if c == nil || c.Propagator == nil {
		return defaultInjector.inject(ctx, msgs)
	}
	return c.resolve().inject(ctx, msgs)
}

func (r *resolved) inject(ctx context.Context, msgs []outbox.Message) []outbox.Message {
	if len(msgs) == 0 || r.traceContextOnly && !trace.SpanContextFromContext(ctx).IsValid() {
		return msgs
	}
	fields := carrier{}
	r.prop.Inject(ctx, fields)
	for k, v := range fields {
		if !validHeader(k, v) {
			delete(fields, k)
		}
	}
	if len(fields) == 0 {
		return msgs
	}
	out := make([]outbox.Message, len(msgs))
	for i, m := range msgs {
		if !has(m.Headers, r.fields) {
			h := make(map[string]string, len(m.Headers)+len(fields))
			for k, v := range m.Headers {
				h[k] = v
			}
			for k, v := range fields {
				h[k] = v
			}
			m.Headers = h
		}
		out[i] = m
	}
	return out
}

// Driver returns d injecting the trace context of each InsertTx's ctx into
// its messages, as Inject does: wrap a database's driver once, and every
// Enqueue through it carries the caller's trace.
//
//	ob := outbox.New(outboxotel.Driver(db, nil), nil) // db: *postgres.DB, …
//
// Enqueue validates the caller's messages before InsertTx; the headers
// added here are valid by construction (a propagator's header that would
// not be is left out). cfg may be nil; only its Propagator is used.
func Driver[TTx any](d outbox.Driver[TTx], cfg *Config) outbox.Driver[TTx] {
	return &driver[TTx]{d: d, r: cfg.resolve()}
}

type driver[TTx any] struct {
	d outbox.Driver[TTx]
	r *resolved
}

// InsertTx inserts msgs through the wrapped driver, with ctx's trace
// context in their headers.
func (d *driver[TTx]) InsertTx(ctx context.Context, tx TTx, msgs []outbox.Message) error {
	return d.d.InsertTx(ctx, tx, d.r.inject(ctx, msgs))
}
