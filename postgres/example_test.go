package postgres_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// Enqueue an event in the transaction that makes the business change: both
// commit, or neither.
func Example() {
	ctx := context.Background()
	pool, schema, done := pgtest.ExampleDB()
	defer done()

	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	ob := outbox.New(db, nil)
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+schema+`".orders (id text PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO "`+schema+`".orders (id) VALUES ('order-42')`); err != nil {
			return err
		}
		return ob.Enqueue(ctx, tx, outbox.Message{
			Topic: "orders", Key: "order-42", Type: "OrderPlaced", Payload: []byte(`{"id":"order-42"}`),
		})
	})
	if err != nil {
		log.Fatal(err)
	}

	st, err := db.Store().Stats(ctx, stores.StatsParams{Now: time.Now()})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range st {
		fmt.Printf("%s: %d pending\n", s.Topic, s.Pending)
	}
	// Output:
	// orders: 1 pending
}

// The relay drains the outbox; here to a handler in this process, which
// runs in the relay's claim transaction (a pgx.Tx), so its own writes
// commit with the mark that the event is done.
func ExampleDB_Store() {
	ctx := context.Background()
	pool, schema, done := pgtest.ExampleDB()
	defer done()

	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	arrived := make(chan outbox.Message, 1)
	r, err := relay.New(db.Store(), nil, &relay.Config{
		InProcess: relay.Handlers(map[string]relay.Handler[pgx.Tx]{
			"orders": func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
				arrived <- m
				return nil
			},
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.New(db, nil).Enqueue(ctx, tx, outbox.Message{
			Topic: "orders", Key: "order-42", Type: "OrderPlaced", Payload: []byte(`{"id":"order-42"}`),
		})
	})
	if err != nil {
		log.Fatal(err)
	}

	select {
	case m := <-arrived:
		fmt.Printf("arrived: %s %s %s\n", m.Type, m.Key, m.Payload)
	case <-time.After(30 * time.Second):
		fmt.Println("nothing arrived within 30s")
	}
	// Stop lets the batch in flight complete: the event is done.
	if err := r.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	st, err := db.Store().Stats(ctx, stores.StatsParams{Now: time.Now()})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left in the outbox:", len(st))
	// Output:
	// arrived: OrderPlaced order-42 {"id":"order-42"}
	// left in the outbox: 0
}

// The inbox makes a consumer's effects happen once: a redelivered message
// (same ID) is a duplicate, and its handler does not run again.
func ExampleDB_Inbox() {
	ctx := context.Background()
	pool, schema, done := pgtest.ExampleDB()
	defer done()

	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Inbox().Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		log.Fatal(err)
	}

	msg := inbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte(`{"id":"order-42"}`)}
	charge := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		fmt.Printf("charging for %s\n", m.Payload)
		return nil // the handler's writes go in tx, with the record
	}
	for range 2 { // the broker delivers it twice
		outcome, err := in.Handle(ctx, msg, charge)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(outcome)
	}
	// Output:
	// charging for {"id":"order-42"}
	// handled
	// duplicate
}
