package saga

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Topics, and the event types they carry. The relays publish topic T on
// the subject "saga.T" (subjectPrefix).
const (
	topicOrders = "orders" // OrderConfirmed, from the orders service
	topicStock  = "stock"  // StockReserved, from the stock service

	typeOrderConfirmed = "OrderConfirmed"
	typeStockReserved  = "StockReserved"
)

// OrderConfirmed is the orders service's event: the order is confirmed and
// needs its stock.
type OrderConfirmed struct {
	OrderID int64  `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int    `json:"qty"`
}

// StockReserved is the stock service's answer.
type StockReserved struct {
	OrderID int64  `json:"order_id"`
	SKU     string `json:"sku"`
	Qty     int    `json:"qty"`
}

// orderKey is the ordering key of an order's events: all of one order's
// events are published in the order they were committed.
func orderKey(id int64) string { return fmt.Sprintf("order-%d", id) }

// ---------------------------------------------------------------------------
// The orders service. Its database (orders.db) holds the orders table, its
// outbox and its inbox (for StockReserved).

const ordersSchema = `
CREATE TABLE IF NOT EXISTS orders (
    id           INTEGER PRIMARY KEY,
    sku          TEXT    NOT NULL,
    qty          INTEGER NOT NULL,
    -- pending → confirmed (OrderConfirmed sent) → reserved (StockReserved received)
    status       TEXT    NOT NULL DEFAULT 'pending',
    confirmed_at INTEGER,
    reserved_at  INTEGER
) STRICT;`

// Orders is the orders service: it confirms orders and learns when their
// stock is reserved.
type Orders struct {
	db    *sql.DB
	ob    *outbox.Outbox[*sql.Tx]
	clock outbox.Clock
}

// Confirm confirms order id: the business change (the orders row) and the
// event (OrderConfirmed, in the outbox table) commit in one transaction, in
// this database only. It works the same whether the broker is up or down.
func (o *Orders) Confirm(ctx context.Context, id int64) error {
	tx, err := o.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (sqlite.Open)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var ev OrderConfirmed
	err = tx.QueryRowContext(ctx, `UPDATE orders SET status = 'confirmed', confirmed_at = ?
		WHERE id = ? AND status = 'pending' RETURNING id, sku, qty`,
		o.clock.Now().UnixMicro(), id).Scan(&ev.OrderID, &ev.SKU, &ev.Qty)
	if err != nil {
		return fmt.Errorf("confirm order %d: %w", id, err)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	err = o.ob.Enqueue(ctx, tx, outbox.Message{
		Topic: topicOrders, Key: orderKey(id), Type: typeOrderConfirmed, Payload: payload,
	})
	if err != nil {
		return err
	}
	return sqltx.Commit(ctx, tx)
}

// OnStockReserved is the orders service's handler for StockReserved: the
// last step of the saga. The inbox runs it once per event, in the
// transaction that records the event's ID.
func (o *Orders) OnStockReserved(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
	var ev StockReserved
	if err := json.Unmarshal(m.Payload, &ev); err != nil {
		return inbox.Permanent(fmt.Errorf("StockReserved payload: %w", err))
	}
	_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'reserved', reserved_at = ?
		WHERE id = ? AND status = 'confirmed'`, o.clock.Now().UnixMicro(), ev.OrderID)
	return err
}

// ---------------------------------------------------------------------------
// The stock service. Its database (stock.db) holds stock levels, the
// reservations, its outbox and its inbox (for OrderConfirmed).

const stockSchema = `
CREATE TABLE IF NOT EXISTS stock (
    sku     TEXT    PRIMARY KEY,
    on_hand INTEGER NOT NULL
) STRICT;
-- No unique key on order_id, on purpose: a reservation applied twice would
-- show here as two rows, and the verification counts them.
CREATE TABLE IF NOT EXISTS reservations (
    order_id    INTEGER NOT NULL,
    sku         TEXT    NOT NULL,
    qty         INTEGER NOT NULL,
    reserved_at INTEGER NOT NULL
) STRICT;`

// Stock is the stock service.
type Stock struct {
	ob    *outbox.Outbox[*sql.Tx]
	clock outbox.Clock
}

// errNoStock: the demo stocks enough for every order, so this never happens;
// a real saga would emit StockRejected and the orders service would cancel.
var errNoStock = errors.New("out of stock")

// OnOrderConfirmed is the stock service's handler for OrderConfirmed. The
// inbox runs it in the transaction that records the event's ID, so the
// reservation, the stock level and the StockReserved event (in this
// service's own outbox) commit together, once, however many times the
// broker delivers the event.
func (s *Stock) OnOrderConfirmed(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
	var ev OrderConfirmed
	if err := json.Unmarshal(m.Payload, &ev); err != nil {
		return inbox.Permanent(fmt.Errorf("OrderConfirmed payload: %w", err))
	}
	res, err := tx.ExecContext(ctx, `UPDATE stock SET on_hand = on_hand - ? WHERE sku = ? AND on_hand >= ?`, ev.Qty, ev.SKU, ev.Qty)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return inbox.Permanent(fmt.Errorf("order %d: %s: %w", ev.OrderID, ev.SKU, errNoStock))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO reservations (order_id, sku, qty, reserved_at) VALUES (?, ?, ?, ?)`,
		ev.OrderID, ev.SKU, ev.Qty, s.clock.Now().UnixMicro()); err != nil {
		return err
	}
	payload, err := json.Marshal(StockReserved(ev))
	if err != nil {
		return err
	}
	return s.ob.Enqueue(ctx, tx, outbox.Message{
		Topic: topicStock, Key: orderKey(ev.OrderID), Type: typeStockReserved, Payload: payload,
		Headers: map[string]string{"Causation-Id": m.ID.String()},
	})
}
