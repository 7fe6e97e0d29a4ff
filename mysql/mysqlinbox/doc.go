// Package mysqlinbox stores inbox records in MySQL 8+ or MariaDB 10.6+: New
// gives an inbox.Driver[*sql.Tx] over a *sql.DB opened with
// github.com/go-sql-driver/mysql, for inbox.New.
//
//	drv, err := mysqlinbox.New(db, nil) // table outbox_inbox
//	err = drv.Migrate(ctx)
//	in := inbox.New(drv, nil)
//	outcome, err := in.Handle(ctx, msg, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = ?`, m.Key)
//		return err
//	})
//
// The table lives in the database the connection uses (there is no schema
// level to configure); Config.Table names it, default outbox_inbox.
//
// # Records
//
// A record is one row: id BINARY(16) PRIMARY KEY (the event's UUIDv7, as
// stores/mysql stores it), topic TEXT, received_at DATETIME(6) in UTC with
// an index for Purge. Times go in as text the driver formats itself, so
// they are UTC whatever the DSN's loc and the session's time_zone say.
//
// RecordTx inserts the row with a plain INSERT in the handler's
// transaction. A duplicate fails with a duplicate-key error (1062), which
// RecordTx reports as "not inserted"; InnoDB rolls back only that
// statement. Every other error is returned, so a bad value or a missing
// table (inbox.ErrSchemaMissing) is never taken for a duplicate, as it
// would be with INSERT IGNORE.
//
// # Concurrent deliveries
//
// A delivery whose insert meets another transaction's uncommitted record of
// the same id waits for that transaction (up to innodb_lock_wait_timeout,
// 50 seconds by default): it is a duplicate when the other commits, and
// inserts when the other rolls back. When two or more deliveries wait on
// one that rolls back, InnoDB lets them all see the id free and then picks
// one of them as a deadlock victim (error 1213): that delivery fails and
// its whole transaction rolls back, the other records the message. The
// failure is transient; the redelivery is a duplicate. Effects stay
// exactly-once.
//
// # Purge
//
// Purge runs READ COMMITTED: it locks the oldest records on the
// received_at index with FOR UPDATE SKIP LOCKED, so concurrent purges do
// not wait for each other, and deletes them by primary key in the same
// short transaction.
//
// Migrate creates the table; migrations/ holds the same DDL as plain SQL
// for goose, golang-migrate or atlas.
package mysqlinbox
