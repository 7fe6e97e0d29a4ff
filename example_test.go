package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxgo/outbox"
)

// printDriver is a Driver that prints what a store would insert. Real
// drivers live under stores/; this one shows the contract.
type printDriver struct{}

type fakeTx struct{ open bool }

func (printDriver) InsertTx(_ context.Context, tx *fakeTx, msgs []outbox.Message) error {
	if tx == nil || !tx.open {
		return outbox.ErrNoTransaction
	}
	for _, m := range msgs {
		fmt.Printf("insert topic=%s key=%s type=%s created=%s id-set=%v\n",
			m.Topic, m.Key, m.Type, m.CreatedAt.Format(time.RFC3339), m.ID != [16]byte{})
	}
	return nil
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func ExampleOutbox_Enqueue() {
	clock := fixedClock{time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	ob := outbox.New(printDriver{}, &outbox.Config{Clock: clock})
	ctx := context.Background()

	// Two messages, one call, one round trip.
	err := ob.Enqueue(ctx, &fakeTx{open: true},
		outbox.Message{Topic: "orders", Key: "order-42", Type: "OrderConfirmed", Payload: []byte(`{"id":42}`)},
		outbox.Message{Topic: "stock", Key: "sku-7", Type: "StockReserved"},
	)
	fmt.Println("err:", err)

	// No open transaction: an error, never an autocommit.
	err = ob.Enqueue(ctx, nil, outbox.Message{Topic: "orders"})
	fmt.Println(errors.Is(err, outbox.ErrNoTransaction))

	// Invalid input is refused before it reaches the database.
	err = ob.Enqueue(ctx, &fakeTx{open: true}, outbox.Message{})
	fmt.Println(err)
	// Output:
	// insert topic=orders key=order-42 type=OrderConfirmed created=2026-11-29T12:00:00Z id-set=true
	// insert topic=stock key=sku-7 type=StockReserved created=2026-11-29T12:00:00Z id-set=true
	// err: <nil>
	// true
	// message 0: outbox: invalid message: empty topic
}
