// Package outbox is a transactional outbox for Go: record the events a
// database change must announce in the same transaction as the change, and
// let a relay publish them to the broker afterwards — at least once, never
// lost, never from a transaction that rolled back.
//
// # Enqueue
//
// An Outbox writes messages through a database's Driver inside the caller's
// own transaction. Each database package gives one object per database
// handle that is that Driver, the relay's store and the inbox's driver:
// postgres.New(pool, cfg) for pgx.Tx, postgres.NewSQL, mysql.New and
// sqlite.New for *sql.Tx.
//
//	db, _ := postgres.New(pool, nil) // table outbox.messages
//	ob := outbox.New(db, nil)
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'confirmed' WHERE id = $1`, id); err != nil {
//			return err
//		}
//		return ob.Enqueue(ctx, tx, outbox.Message{
//			Topic: "orders", Key: id, Type: "OrderConfirmed", Payload: body,
//		})
//	})
//
// Enqueue writes every message of one call in one round trip. It never
// commits, and it fails with ErrNoTransaction on a nil or finished
// transaction instead of writing outside one.
//
// # Messages
//
// A Message has an ID (a UUIDv7, made at enqueue when zero), a Topic, an
// optional ordering Key, a Type, a Payload, Headers and an optional
// NotBefore for delayed delivery. The ID is the dedup key everywhere
// downstream: publishers send it as the broker's message id (Nats-Msg-Id,
// …) and consumers deduplicate on it.
//
// # Relay
//
// Package relay drains the table: it claims a batch (FOR UPDATE SKIP LOCKED,
// so any number of relays may run) from db.Store(), publishes it pipelined
// through a publishers.Publisher, then marks or deletes it in one
// statement. Publish first, mark after: a crash between the two publishes
// the batch again with the same IDs; nothing is lost. The `outbox` command
// (cmd/outbox) runs it.
//
// # Layout
//
// The root module holds what every user needs and no client library: this
// package (Message, Enqueue, Config, errors, Backoff), the contracts —
// stores (a database as the relay sees it), publishers, subscribers and
// inbox — with their conformance suites, the relay, and backend, the
// registry of backends by URL scheme. Each backend is a package and a
// module of its own, holding all of that backend: postgres, mysql and
// sqlite (enqueue, the relay's store, the inbox, versioned migrations);
// nats, kafka, rabbitmq and redis (a publisher and a subscriber). A
// service that imports postgres and nats gets pgx and nats.go, and no other
// backend's client.
//
// # Time
//
// Every timestamp comes from a Clock (Config.Clock), the real one by
// default, so tests can drive delayed delivery and backoff.
package outbox
