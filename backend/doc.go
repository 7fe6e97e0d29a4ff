// Package backend is the registry of databases and brokers by URL scheme.
//
// Each backend package registers itself when imported: postgres for
// postgres:// and postgresql://, mysql for mysql://, sqlite for sqlite:,
// nats for nats://, kafka, rabbitmq (amqp://), redis, and whatever comes
// next. A program that picks its backends by URL — the outbox CLI, a
// service reading its configuration — imports the ones it wants, for their
// side effect if for nothing else, and opens them here:
//
//	import (
//		"github.com/outboxgo/outbox/backend"
//		_ "github.com/outboxgo/outbox/nats"
//		_ "github.com/outboxgo/outbox/postgres"
//	)
//
//	db, err := backend.OpenDatabase(ctx, "postgres://localhost/app", nil)
//	pub, err := backend.OpenBroker(ctx, "nats://localhost:4222?stream=EVENTS", nil)
//
// A backend's URL carries all its configuration, in query parameters each
// backend lists in its Params; ApplyParams lets flags override them. Only
// the backends a program imports are linked in, and only their modules are
// in its module graph.
package backend
