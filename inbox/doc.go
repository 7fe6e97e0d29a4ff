// Package inbox gives a consumer exactly-once effects on top of at-least-once
// delivery: it runs the consumer's handler in a transaction of the
// consumer's own database that also records the message's ID, so the effect
// and the record commit together or not at all.
//
// # Handling a message
//
// An Inbox is generic over the transaction type, like outbox.Outbox. Its
// Driver is the Inbox() of a database package's object, the same one that
// enqueues and serves the relay: pgx.Tx with postgres.New, *sql.Tx with
// postgres.NewSQL, mysql.New (MySQL/MariaDB) or sqlite.New.
//
//	db, _ := postgres.New(pool, nil) // table outbox.inbox
//	in, err := inbox.New(db.Inbox(), nil)
//	outcome, err := in.Handle(ctx, msg, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
//		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = $1`, m.Key)
//		return err
//	})
//
// Handle begins a transaction, records the ID first, runs the handler and
// commits. When the ID is already recorded the handler does not run and the
// outcome is Duplicate: the message was handled before and should be
// acknowledged. When the handler fails the transaction rolls back, record
// included, so a redelivery runs the handler again. A crash at any instant
// leaves both the effect and the record, or neither.
//
// Concurrent deliveries of one message are safe: the second insert of the
// ID waits for the first transaction's uncommitted row; it then finds the
// ID recorded (the first committed) or records it itself (the first rolled
// back). On MySQL/MariaDB, when several deliveries wait on a first one that
// rolls back, InnoDB fails all but one of them as deadlock victims (error
// 1213): those return an error and their redelivery is a Duplicate, so the
// effect still happens once.
//
// # Chained events
//
// The handler gets the transaction, so it can enqueue the next events with
// an outbox.Outbox built on the same transaction type: the inbox record, the
// effect and the next events commit together.
//
//	err := in.Handle(ctx, msg, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
//		if _, err := tx.Exec(ctx, `DELETE FROM commands WHERE id = $1`, m.Key); err != nil {
//			return err
//		}
//		return ob.Enqueue(ctx, tx, outbox.Message{Topic: "workspace_update_completed", Key: m.Key})
//	})
//
// Effects outside the database (an HTTP call to a provider) are not covered:
// they happen at least once. Make them idempotent, e.g. by passing the
// message ID as the provider's idempotency key.
//
// # Retention
//
// Records are kept for Config.Retention (7 days by default); PurgeExpired,
// or Purge with a time of your own, deletes older ones in small batches. The
// trade-off: a duplicate arriving after its record was purged is not caught
// and runs the handler again. Keep the window longer than anything that can
// redeliver a message: the broker's redelivery horizon (stream MaxAge,
// MaxDeliver × backoff) and a relay's republish after a crash.
//
// # One inbox per consumer
//
// The record says "this consumer handled this event". Two consumers that
// must each handle the same event (a mailer and a billing worker sharing one
// database) need two tables, or the second would see the first's record and
// skip the event.
//
// # Brokers
//
// Each broker package has a subscriber that feeds an Inbox (nats,
// kafka, rabbitmq, redis: NewSubscriber), all under the contract of package
// subscribers. They acknowledge a message only after its transaction
// committed, or when it was a duplicate.
package inbox
