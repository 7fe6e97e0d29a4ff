package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/mysql"
	"github.com/outboxgo/outbox/relay"
)

// The event is enqueued in the transaction of the business change, so both
// commit or neither does; the relay then publishes what committed. A
// publisher that prints stands in for the broker here.
func Example() {
	ctx := context.Background()
	db, drop := exampleDB("enqueue") // a database of the example's own
	defer drop()

	d, err := mysql.New(db, nil) // tables outbox_messages and outbox_inbox
	check(err)
	check(d.Migrate(ctx))
	_, err = db.ExecContext(ctx, `CREATE TABLE orders (id INT PRIMARY KEY, total INT NOT NULL)`)
	check(err)
	ob := outbox.New(d, nil)

	placeOrder := func(id int, commit bool) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, id, 1999); err != nil {
			return err
		}
		err = ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Key: fmt.Sprint(id), Type: "OrderPlaced",
			Payload: fmt.Appendf(nil, `{"id":%d}`, id)})
		if err != nil || !commit {
			return err
		}
		return tx.Commit()
	}
	check(placeOrder(1, true))
	check(placeOrder(2, false)) // rolled back: no order, and no event

	pub := newPrintPublisher(1)
	r, err := relay.New(d.Store(), pub, &relay.Config{PollInterval: 10 * time.Millisecond})
	check(err)
	check(r.Start(ctx))
	select {
	case <-pub.done:
	case <-time.After(30 * time.Second):
		fmt.Println("nothing published in 30s")
	}
	check(r.Stop(ctx))
	// Output:
	// published orders key=1 OrderPlaced {"id":1}
}

// A message delivered twice is handled once: the inbox records its ID in
// the handler's transaction, and the redelivery finds it there.
func ExampleDB_Inbox() {
	ctx := context.Background()
	db, drop := exampleDB("inbox") // a database of the example's own
	defer drop()

	d, err := mysql.New(db, nil)
	check(err)
	check(d.Inbox().Migrate(ctx)) // the consumer needs the inbox table only
	_, err = db.ExecContext(ctx, `CREATE TABLE accounts (id VARCHAR(32) PRIMARY KEY, balance INT NOT NULL)`)
	check(err)
	_, err = db.ExecContext(ctx, `INSERT INTO accounts VALUES ('alice', 0)`)
	check(err)

	in, err := inbox.New(d.Inbox(), nil)
	check(err)
	credit := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = ?`, m.Key)
		return err
	}
	msg := inbox.Message{ID: outbox.NewID(), Topic: "payments", Key: "alice"}
	for range 2 { // the broker redelivers it
		outcome, err := in.Handle(ctx, msg, credit)
		check(err)
		fmt.Println(outcome)
	}
	var balance int
	check(db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 'alice'`).Scan(&balance))
	fmt.Println("balance:", balance)
	// Output:
	// handled
	// duplicate
	// balance: 10
}

// printPublisher prints what it publishes and closes done after n messages.
type printPublisher struct {
	mu   sync.Mutex
	n    int
	done chan struct{}
}

func newPrintPublisher(n int) *printPublisher {
	return &printPublisher{n: n, done: make(chan struct{})}
}

func (p *printPublisher) Publish(_ context.Context, msgs []outbox.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		fmt.Printf("published %s key=%s %s %s\n", m.Topic, m.Key, m.Type, m.Payload)
		if p.n--; p.n == 0 {
			close(p.done)
		}
	}
	return make([]error, len(msgs))
}

func (p *printPublisher) Close() error { return nil }
