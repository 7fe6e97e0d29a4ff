package inbox

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Message is a received event, decoded from the broker's message by a
// subscriber.
type Message struct {
	// ID is the event's ID (outbox.Message.ID), the dedup key. Required.
	ID uuid.UUID
	// Topic is the event's topic (the subject or topic it arrived on, less
	// any prefix the subscriber strips).
	Topic string
	// Key is the ordering key; empty when the event had none.
	Key string
	// Type names the kind of event; may be empty.
	Type string
	// Payload is the event body.
	Payload []byte
	// Headers are the event's own headers (correlation id, trace context),
	// without those the outbox and the broker use for transport.
	Headers map[string]string
	// CreatedAt is when the event was enqueued; zero when unknown.
	CreatedAt time.Time
	// Delivery counts deliveries of this message, 1 for the first; zero
	// when the broker does not say.
	Delivery int
}

// Handler applies a message's effect inside tx. It must not commit or roll
// back tx. A nil error commits the effect together with the message's
// record; an error rolls both back. Wrap an error with Permanent when a
// retry cannot succeed (a payload that does not parse).
type Handler[TTx any] func(ctx context.Context, tx TTx, msg Message) error

// Record is what an inbox stores about a handled message.
type Record struct {
	ID         uuid.UUID
	Topic      string
	ReceivedAt time.Time
}

// Outcome is what Handle did with a message.
type Outcome int

const (
	// Handled: the handler ran and its transaction committed.
	Handled Outcome = iota + 1
	// Duplicate: the ID was recorded already; the handler did not run.
	Duplicate
)

func (o Outcome) String() string {
	switch o {
	case Handled:
		return "handled"
	case Duplicate:
		return "duplicate"
	}
	return "none"
}
