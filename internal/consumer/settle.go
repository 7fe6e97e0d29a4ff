package consumer

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/subscribers"
)

// Safe returns h turning a panic into an error: the transaction rolls back
// and the message is retried.
func Safe[TTx any](h inbox.Handler[TTx]) inbox.Handler[TTx] {
	return func(ctx context.Context, tx TTx, msg inbox.Message) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("handler panicked: %v", r)
			}
		}()
		return h(ctx, tx, msg)
	}
}

// Result is what Handle did with a delivery.
type Result struct {
	// Outcome is the inbox's, when it committed or found a duplicate.
	Outcome inbox.Outcome
	// Err is the decoding error, the handler's or the inbox's; nil for Ack.
	Err error
	// Action is how to settle the delivery.
	Action subscribers.Action
}

// Handle runs the delivery-th delivery of msg through in and says how to
// settle it:
//   - decodeErr set (msg is not usable): dead-letter it, with decodeErr;
//   - delivery past maxDeliveries (the earlier deliveries ended without a
//     result: a crash): ask the inbox, without running h, whether one of
//     them committed: acknowledge a duplicate, dead-letter the rest with
//     exhausted, retry when the inbox cannot tell;
//   - otherwise run h: acknowledge on success, release when ctx ended (a
//     hard Stop, not h's fault), dead-letter a permanent error or the
//     maxDeliveries-th failure, retry the rest.
func Handle[TTx any](ctx context.Context, in *inbox.Inbox[TTx], h inbox.Handler[TTx], msg inbox.Message, decodeErr error,
	delivery, maxDeliveries int, exhausted error) Result {
	if decodeErr != nil {
		return Result{Err: decodeErr, Action: subscribers.ActionDeadLetter}
	}
	if delivery > maxDeliveries {
		o, err := in.Handle(ctx, msg, func(context.Context, TTx, inbox.Message) error { return exhausted })
		switch {
		case err == nil: // handled before the crash
			return Result{Outcome: o, Action: subscribers.ActionAck}
		case errors.Is(err, exhausted):
			return Result{Err: err, Action: subscribers.ActionDeadLetter}
		}
		return Result{Err: err, Action: subscribers.ActionRetry} // the inbox could not tell (database down)
	}
	o, err := in.Handle(ctx, msg, h)
	switch {
	case err == nil:
		return Result{Outcome: o, Action: subscribers.ActionAck}
	case ctx.Err() != nil:
		return Result{Err: err, Action: subscribers.ActionRelease}
	case inbox.IsPermanent(err) || delivery >= maxDeliveries:
		return Result{Err: err, Action: subscribers.ActionDeadLetter}
	}
	return Result{Err: err, Action: subscribers.ActionRetry}
}
