package faults

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
)

// database is the outbox's side of a run: the store the relays claim from,
// the business tables the writers change, the inbox's effects table, and
// the faults the database can take. Each kind is private to the run (a
// cluster or server of its own) where this machine allows, so that it can
// be restarted.
type database interface {
	// name is what the summary calls it, e.g. "PostgreSQL 15".
	name() string
	// env is the environment of the relay and inbox processes.
	env() []string
	// prepare creates the outbox, a counter row for each of keys, the log,
	// the effects and the inbox tables.
	prepare(ctx context.Context, keys []string) error
	// write commits, in one transaction, m's enqueue, an increment of
	// the counter of m.Key and a log row (m.ID, m.Key, the counter) — the
	// counter's row lock ranks same-key transactions by commit, and the
	// event is enqueued before it is taken, so the outbox's own ordering
	// is what is tested. With rollback, it rolls back instead and returns
	// errRollbackOnPurpose.
	write(ctx context.Context, m outbox.Message, rollback bool) error
	// enqueue commits a transaction that only enqueues m; enqErr is what
	// Enqueue returned (the transaction commits anyway).
	enqueue(ctx context.Context, m outbox.Message) (enqErr, err error)

	// What the database says.
	committed(ctx context.Context) (map[uuid.UUID]commit, error)
	dead(ctx context.Context) (map[uuid.UUID]string, error) // id → last_error
	pending(ctx context.Context) (int, error)
	exists(ctx context.Context, id uuid.UUID) (bool, error)
	effects(ctx context.Context) (map[uuid.UUID]int, error) // id → effects applied

	// Faults.
	killConns(ctx context.Context) (int, error) // the relays' and the inbox's sessions; how many
	restart() error                             // errNoRestart when it cannot
}

// commit is what the log table says of a committed event.
type commit struct {
	key  string
	rank int // among its key's events, by commit
}

// broker is the broker's side of a run: a server of the run's own (or an
// isolated part of a shared one), reached by the relays through a proxy,
// and read by a plain client of its own kind.
type broker interface {
	name() string
	// env is the environment of the relay and inbox processes.
	env() []string
	// proxy is the relays' path to the broker.
	proxy() *tcpproxy.Proxy
	// stop and start make a broker outage.
	stop() error
	start() error
	// badInput is what this broker or its publisher refuses for good.
	badInput() []badCase
	// consume reads everything the broker holds with a plain client, until
	// it has want distinct events or ctx ends; per key, deliveries are in
	// the broker's order.
	consume(ctx context.Context, want int) ([]uuid.UUID, error)
	// inboxBacklog is what the inbox's consumer has not acknowledged
	// (asked with the inbox process stopped).
	inboxBacklog(ctx context.Context) (int, error)
	// republished is how many re-publishes the broker dropped as
	// duplicates, when it can tell (ok false otherwise).
	republished() (n int, ok bool)
}

// badCase is one bad event for a broker: it must end dead with a
// last_error that mentions want.
type badCase struct {
	what, want string
	m          outbox.Message
}

var (
	errRollbackOnPurpose = errors.New("rollback on purpose")
	errNoRestart         = errors.New("this database cannot be restarted here")
)
