package faults

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
// not blocked — and checks that Enqueue refuses what no store or broker
// could carry (invalid UTF-8, a header name that is no token, NUL, a
// reserved header name), writing nothing.
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

	// What no store or broker could carry never gets in: Enqueue refuses
	// it, and the transaction, committed anyway, wrote nothing.
	for _, r := range []struct {
		what string
		m    outbox.Message
	}{
		{"invalid UTF-8 in a header", outbox.Message{Headers: map[string]string{"note": "\xff\xfe"}}},
		{"a header name no header-based broker carries", outbox.Message{Headers: map[string]string{"Bad Header": "x"}}},
		{"a NUL byte in the key", outbox.Message{Key: "bad\x00key"}},
		{"a header named like the outbox's own", outbox.Message{Headers: map[string]string{"Outbox-Key": "forged"}}},
	} {
		m := r.m
		m.ID, m.Topic, m.Payload = outbox.NewID(), "orders", []byte("{}")
		if m.Key == "" {
			m.Key = badKey
		}
		var enqErr error
		if err := retry(func() (err error) { enqErr, err = db.enqueue(ctx, m); return err }); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(enqErr, outbox.ErrInvalidMessage) {
			t.Errorf("Enqueue with %s = %v, want ErrInvalidMessage", r.what, enqErr)
		}
		switch found, err := db.exists(ctx, m.ID); {
		case err != nil:
			t.Fatal(err)
		case found:
			t.Errorf("Enqueue refused %s but wrote the row", r.what)
		default:
			b.refused++
		}
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
