package faulttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
)

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

// enqueueBadInput commits events the broker or the publisher refuses for
// good — a payload over the private server's max_payload (unkeyed), a
// topic that maps to an invalid subject and a header NATS cannot carry
// (keyed, each followed on its key by a good event that must still
// arrive in order) — and checks that Enqueue refuses invalid UTF-8 in a
// header, writing nothing.
func enqueueBadInput(t *testing.T, ob *outbox.Outbox[pgx.Tx], pool *pgxpool.Pool, s string,
	write func(key string, rollback bool) (uuid.UUID, error)) badInput {
	t.Helper()
	ctx := context.Background()
	var b badInput
	for _, c := range []struct {
		what, want string
		m          outbox.Message
	}{
		{"a 100 KiB payload over the broker's 64 KiB max_payload", "maximum payload",
			outbox.Message{Topic: "big", Type: "Big", Payload: make([]byte, 100<<10)}},
		{"a 40 KiB payload over the stream's 32 KiB max_msg_size", "message size exceeds maximum",
			outbox.Message{Topic: "orders", Key: "bad-k", Type: "Big", Payload: make([]byte, 40<<10)}},
		{"a topic mapping to an invalid subject", "invalid subject",
			outbox.Message{Topic: "bad topic", Key: "bad-k", Type: "Bad", Payload: []byte("{}")}},
		{"a header NATS cannot carry", "header not representable",
			outbox.Message{Topic: "orders", Key: "bad-k", Type: "Bad", Payload: []byte("{}"), Headers: map[string]string{"Bad Header": "x"}}},
	} {
		c.m.ID = outbox.NewID()
		if err := retry(func() error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Enqueue(ctx, tx, c.m) })
		}); err != nil {
			t.Fatalf("enqueue %s: %v", c.what, err)
		}
		b.dead = append(b.dead, badEvent{id: c.m.ID, what: c.what, want: c.want})
		// The key's next event must not wait behind the dead one.
		if c.m.Key != "" {
			if err := retry(func() error { _, err := write(c.m.Key, false); return err }); err != nil {
				t.Fatalf("enqueue the event after %s: %v", c.what, err)
			}
		}
	}

	// Invalid UTF-8 in a header never gets in: Enqueue refuses it, and the
	// transaction, committed anyway, wrote nothing.
	m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "bad-k", Payload: []byte("{}"),
		Headers: map[string]string{"note": "\xff\xfe"}}
	var enqErr error
	if err := retry(func() error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			enqErr = ob.Enqueue(ctx, tx, m)
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(enqErr, outbox.ErrInvalidMessage) {
		t.Errorf("Enqueue with invalid UTF-8 in a header = %v, want ErrInvalidMessage", enqErr)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.messages WHERE id = $1`, m.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("Enqueue refused invalid UTF-8 but wrote %d rows", n)
	} else {
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

// table is a two-column summary table.
type table struct{ rows [][2]string }

func newTable() *table { return &table{} }

func (t *table) row(name string, v any) { t.rows = append(t.rows, [2]string{name, fmt.Sprint(v)}) }

// String renders the table in Markdown.
func (t *table) String() string {
	w0, w1 := len("fault / check"), len("value")
	for _, r := range t.rows {
		w0, w1 = max(w0, len(r[0])), max(w1, len(r[1]))
	}
	var sb strings.Builder
	line := func(a, b string) { fmt.Fprintf(&sb, "| %-*s | %-*s |\n", w0, a, w1, b) }
	line("fault / check", "value")
	line(strings.Repeat("-", w0), strings.Repeat("-", w1))
	for _, r := range t.rows {
		line(r[0], r[1])
	}
	return sb.String()
}
