package relay

import (
	"context"
	"fmt"
	"reflect"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// Handler handles an event in-process, inside the relay's claim
// transaction: tx is the store's transaction type (pgx.Tx for PostgreSQL).
// Its writes commit together with the mark that the event is done, or not at
// all, so its database effects happen exactly once. An error is treated as a
// publish error: retried with backoff, dead after MaxAttempts (at once when
// wrapped with publishers.Permanent), blocking its key in ordered mode.
type Handler[TTx any] func(ctx context.Context, tx TTx, msg outbox.Message) error

// InProcess routes topics to handlers in this process instead of to the
// broker: the outbox as a job queue for internal work. Make one with
// Handlers.
type InProcess interface {
	accepts(s stores.Store) error
	handles(topic string) bool
	run(ctx context.Context, b stores.Batch, msgs []outbox.Message, errs []error)
}

// Handlers returns the InProcess that runs h[topic] for events of each
// topic it names. TTx must be the transaction type of the store's claims
// (the store implements stores.TxClaimer[TTx]; PostgreSQL's: pgx.Tx):
// relay.New refuses handlers of any other type, and a store whose claims
// are no transactions (SQLite's leases).
func Handlers[TTx any](h map[string]Handler[TTx]) InProcess {
	return handlers[TTx](h)
}

type handlers[TTx any] map[string]Handler[TTx]

func (h handlers[TTx]) accepts(s stores.Store) error {
	if _, ok := s.(stores.TxClaimer[TTx]); !ok {
		tt := reflect.TypeFor[TTx]()
		return fmt.Errorf("the handlers take a %v, which the claims of %T do not provide (it does not implement stores.TxClaimer[%v])", tt, s, tt)
	}
	return nil
}

func (h handlers[TTx]) handles(topic string) bool {
	_, ok := h[topic]
	return ok
}

// run runs each message's handler under its own savepoint, so one failure
// rolls back its own writes only.
func (h handlers[TTx]) run(ctx context.Context, b stores.Batch, msgs []outbox.Message, errs []error) {
	txr, ok := b.(stores.TxRunner[TTx])
	for i := range msgs {
		m := msgs[i]
		if !ok {
			errs[i] = publishers.Permanent(fmt.Errorf("in-process handler for %q takes a %v, which this store's claim does not provide", m.Topic, reflect.TypeFor[TTx]()))
			continue
		}
		errs[i] = txr.RunInTx(ctx, func(tx TTx) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("handler for %q panicked: %v", m.Topic, p)
				}
			}()
			return h[m.Topic](ctx, tx, m)
		})
	}
}
