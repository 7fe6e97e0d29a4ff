// Package inboxtest is the conformance suite of the inbox driver contract
// (inbox.Driver): every driver runs Run unchanged against its real
// database, once per transaction type it supports.
//
// A driver's test supplies a Harness: how to get a fresh, migrated inbox
// table of the test's own (an Env) with an effects table beside it, and
// the optional capabilities where databases differ (detecting a delivery
// that waits on another's record, holding a record's lock, a second table,
// an outbox for chained events). The suite builds its inboxes over the
// Env's driver with a clock of its own, and checks what a user would:
// outcomes, effects applied, records present, errors returned.
package inboxtest

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// Harness adapts one driver, for one transaction type, to the suite.
type Harness[TTx any] struct {
	// Setup returns a fresh Env for one case; it registers its own
	// cleanups with t. Required.
	Setup func(t *testing.T) Env[TTx]
	// Unmigrated returns a driver whose inbox table does not exist (never
	// migrated). Nil skips SchemaMissing.
	Unmigrated func(t *testing.T) inbox.Driver[TTx]
	// New calls each of the package's driver constructors with a nil
	// database and a Config naming table ("" for the default table), and
	// returns their errors. Nil skips BadNames.
	New func(table string) []error
	// SchemaSQL returns the package's DDL for table ("" for the default),
	// which migrations/001_inbox.up.sql (relative to the driver's package)
	// must equal for the default. Nil skips MigrationFile and the DDL half
	// of BadNames.
	SchemaSQL func(table string) (string, error)
	// Transient reports whether err is a failure the database may give one
	// of several deliveries waiting on a first one that rolls back, whose
	// redelivery must then be a duplicate (MySQL/MariaDB: the deadlock
	// victim, error 1213). Nil: no waiter may fail.
	Transient func(err error) bool
}

// Env is one case's inbox table, empty and migrated, in a database of the
// case's own, with an effects table beside it that has no unique key, so
// that an effect applied twice shows.
type Env[TTx any] struct {
	// Driver is the driver under test, on the migrated table. Required.
	Driver inbox.Driver[TTx]
	// Migrate runs the driver's Migrate again. Required.
	Migrate func(ctx context.Context) error
	// Apply applies m's effect in tx: it adds the row (m.ID,
	// string(m.Payload)) to the effects table. Required.
	Apply func(ctx context.Context, tx TTx, m inbox.Message) error
	// Effects returns the committed effects in the order they were
	// applied. Required.
	Effects func(t *testing.T) []Effect
	// Records returns the committed records of Driver's table, in any
	// order, ReceivedAt in UTC. Required.
	Records func(t *testing.T) []inbox.Record

	// Waiting returns how many deliveries are waiting, inside the
	// database, for another transaction that holds a record of Driver's
	// table (SQLite, with one writer: for the write lock). The suite asks
	// only while such a transaction is open. Nil skips the cases that race
	// a delivery against an open one.
	Waiting func(ctx context.Context) (int, error)
	// LockRecord takes in tx a shared lock on record id (SELECT … FOR
	// SHARE), the weakest lock a concurrent Purge must not wait for. Nil,
	// for a database without row locks, skips PurgeSkipsLocked.
	LockRecord func(ctx context.Context, tx TTx, id uuid.UUID) error
	// OtherTable returns a driver on a second inbox table, migrated, in the
	// same database (another consumer's). Nil skips OtherTable.
	OtherTable func(t *testing.T) inbox.Driver[TTx]
	// Chain returns an outbox on the same database, its table migrated,
	// for handlers that enqueue the next events. Nil skips ChainedEvents.
	Chain func(t *testing.T) Chain[TTx]
}

// Effect is a row of the effects table.
type Effect struct {
	ID   uuid.UUID
	Note string
}

// Chain is an outbox that a handler enqueues to in its transaction.
type Chain[TTx any] struct {
	Outbox *outbox.Outbox[TTx]
	// Payloads returns the payloads of the committed outbox messages.
	Payloads func(t *testing.T) []string
}
