package faulttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// badKey is the key of the keyed bad input.
const badKey = "bad-k"

// badInput is the bad input enqueued during a run: events the relays must
// dead-letter (each with a last_error that says why) without stopping the
// flow, and events refused at Enqueue.
type badInput struct {
	dead    []badEvent
	refused int
}

type badEvent struct {
	id   uuid.UUID
	what string
	want string // in last_error
}

// enqueueBadInput commits the broker's bad cases — a keyed one is followed
// on its key by a good event that must still arrive, in order: the key is
// not blocked — and checks that Enqueue refuses invalid UTF-8 in a header,
// writing nothing.
func enqueueBadInput(t *testing.T, db database, cases []badCase, write func(key string, rollback bool) (uuid.UUID, error)) badInput {
	t.Helper()
	ctx := context.Background()
	var b badInput
	for _, c := range cases {
		c.m.ID = outbox.NewID()
		var enqErr error
		if err := retry(func() (err error) { enqErr, err = db.enqueue(ctx, c.m); return err }); err != nil || enqErr != nil {
			t.Fatalf("enqueue %s: %v", c.what, errors.Join(err, enqErr))
		}
		b.dead = append(b.dead, badEvent{id: c.m.ID, what: c.what, want: c.want})
		if c.m.Key != "" {
			if err := retry(func() error { _, err := write(c.m.Key, false); return err }); err != nil {
				t.Fatalf("enqueue the event after %s: %v", c.what, err)
			}
		}
	}

	// Invalid UTF-8 in a header never gets in: Enqueue refuses it, and the
	// transaction, committed anyway, wrote nothing.
	m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: badKey, Payload: []byte("{}"),
		Headers: map[string]string{"note": "\xff\xfe"}}
	var enqErr error
	if err := retry(func() (err error) { enqErr, err = db.enqueue(ctx, m); return err }); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(enqErr, outbox.ErrInvalidMessage) {
		t.Errorf("Enqueue with invalid UTF-8 in a header = %v, want ErrInvalidMessage", enqErr)
	}
	switch found, err := db.exists(ctx, m.ID); {
	case err != nil:
		t.Fatal(err)
	case found:
		t.Errorf("Enqueue refused invalid UTF-8 but wrote the row")
	default:
		b.refused++
	}
	return b
}

// retry runs f until it succeeds, up to 5 times (a fault may fail one
// transaction).
func retry(f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil {
			return nil
		}
		tm := time.NewTimer(200 * time.Millisecond)
		<-tm.C
	}
	return err
}
