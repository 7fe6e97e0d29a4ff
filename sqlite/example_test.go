package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/sqlite"
)

// The business change and its event commit in one transaction; the relay
// then publishes the event (here to a publisher that hands it over on a
// channel).
func Example() {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sdb, err := sqlite.Open(filepath.Join(dir, "shop.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer sdb.Close()
	ctx := context.Background()

	db, err := sqlite.New(sdb, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Migrate(ctx); err != nil { // outbox_messages and outbox_inbox
		log.Fatal(err)
	}
	if _, err := sdb.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	// Enqueue in the business transaction: both commit, or neither.
	ob := outbox.New(db, nil)
	tx, err := sdb.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, item) VALUES (42, 'book')`); err != nil {
		log.Fatal(err)
	}
	err = ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Key: "order-42", Type: "order.placed",
		Payload: []byte(`{"id":42,"item":"book"}`)})
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}

	// The relay drains the outbox table to the broker.
	pub := chanPublisher(make(chan outbox.Message, 1))
	r, err := relay.New(db.Store(), pub, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	select {
	case m := <-pub:
		fmt.Printf("published %s key=%s type=%s %s\n", m.Topic, m.Key, m.Type, m.Payload)
	case <-time.After(time.Minute):
		log.Fatal("nothing published within a minute")
	}
	if err := r.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// published orders key=order-42 type=order.placed {"id":42,"item":"book"}
}

// chanPublisher acknowledges every message and hands it over on the channel.
type chanPublisher chan outbox.Message

func (p chanPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	for _, m := range msgs {
		p <- m
	}
	return make([]error, len(msgs))
}

func (chanPublisher) Close() error { return nil }

// The inbox records each message it handles in the handler's own
// transaction, so a redelivered message is recognised and its effect is
// not applied twice.
func ExampleDB_Inbox() {
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sdb, err := sqlite.Open(filepath.Join(dir, "stock.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer sdb.Close()
	ctx := context.Background()

	db, err := sqlite.New(sdb, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Inbox().Migrate(ctx); err != nil { // outbox_inbox alone
		log.Fatal(err)
	}
	if _, err := sdb.ExecContext(ctx, `CREATE TABLE reserved (item TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	in, err := inbox.New(db.Inbox(), nil)
	if err != nil {
		log.Fatal(err)
	}
	reserve := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO reserved (item) VALUES (?)`, string(m.Payload))
		return err
	}
	msg := inbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte("book")}
	for delivery := 1; delivery <= 2; delivery++ { // the broker delivers it twice
		msg.Delivery = delivery
		outcome, err := in.Handle(ctx, msg, reserve)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("delivery %d: %s\n", delivery, outcome)
	}
	var n int
	if err := sdb.QueryRowContext(ctx, `SELECT count(*) FROM reserved`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("items reserved:", n)
	// Output:
	// delivery 1: handled
	// delivery 2: duplicate
	// items reserved: 1
}
