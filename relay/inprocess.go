package relay

import (
	"context"
	"fmt"

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
	handles(topic string) bool
	run(ctx context.Context, b stores.Batch, msgs []outbox.Message, errs []error)
}

// Handlers returns the InProcess that runs h[topic] for events of each
// topic it names. TTx must be the transaction type of the store the relay
// drains; the first batch tells, and every in-process event then fails with
// an error saying so.
func Handlers[TTx any](h map[string]Handler[TTx]) InProcess {
	return handlers[TTx](h)
}

type handlers[TTx any] map[string]Handler[TTx]

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
			var zero TTx
			errs[i] = publishers.Permanent(fmt.Errorf("in-process handler for %q takes a %T, which this store's claim does not provide", m.Topic, zero))
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
