package pginbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// A zombie relay (stalled past its claim, then awake) can publish an old
// event again after newer events of its key. Through the inbox the
// consumer's effects stay in per-key order: the late copy is a duplicate.
func TestLateDuplicateKeepsPerKeyOrder(t *testing.T) {
	b := setup(t)
	in := inbox.New(b.pgx, &inbox.Config{Clock: b.clock})
	e := make([]inbox.Message, 3)
	for i := range e {
		e[i] = inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-1", Payload: []byte(fmt.Sprint(i + 1))}
	}
	// What the broker delivered: 1, 2, then the zombie's late copy of 1, then 3.
	delivered := []inbox.Message{e[0], e[1], e[0], e[2]}
	var outcomes []inbox.Outcome
	for _, m := range delivered {
		o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
			_, err := tx.Exec(ctx, `INSERT INTO "`+b.cfg.Schema+`".effects VALUES ($1, $2)`, m.ID, string(m.Payload))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
	}
	if fmt.Sprint(outcomes) != "[handled handled duplicate handled]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	rows, err := b.pool.Query(context.Background(), `SELECT note FROM "`+b.cfg.Schema+`".effects ORDER BY ctid`)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(notes) != "[1 2 3]" {
		t.Fatalf("effects in order %v, want [1 2 3]", notes)
	}
}
