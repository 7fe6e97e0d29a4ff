// Package mysql is the MySQL 8+ and MariaDB 10.6+ outbox store, over
// database/sql with github.com/go-sql-driver/mysql.
//
// The write side is Driver, an outbox.Driver[*sql.Tx]: Enqueue inserts the
// events in the caller's transaction, in one INSERT (several for more than
// 8191 events or a few MiB of payload). The relay side is Store, which
// implements stores.Store. Migrate (or Store.Migrate, or the plain file
// migrations/001_outbox.up.sql) creates the table.
//
//	d, _ := mysql.NewDriver(nil)
//	ob := outbox.New(d, nil)
//	tx, _ := db.BeginTx(ctx, nil)
//	// … the business change …
//	err := ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: body})
//	// … tx.Commit()
//
// # Connections
//
// The table lives in the database the connection uses (there is no schema
// level to configure); Config.Table names it, default outbox_messages.
//
// Times are stored as DATETIME(6) in UTC, to the microsecond. The store
// passes and reads them as text that it formats and parses itself, so they
// are UTC whatever the DSN's loc, parseTime and time_zone say: the write
// side runs on the application's connections, with the application's DSN.
// parseTime=true and loc=UTC are still the sensible settings for anything
// else reading the table. interpolateParams=true saves a round trip per
// statement (the driver otherwise prepares each one).
//
// # Schema
//
//   - seq BIGINT UNSIGNED AUTO_INCREMENT is the primary key: InnoDB clusters
//     rows by it, so inserts append. AUTO_INCREMENT values are taken at
//     insert, not at commit: under concurrent writers they do not give
//     commit order. Writers of one key take turns on the key-lock table
//     (see Ordering), so within a key seq does follow commit order.
//   - id BINARY(16) UNIQUE holds the UUIDv7 (time-ordered, so the unique
//     index also appends).
//   - topic, key and type are VARCHAR(255), utf8mb4 with utf8mb4_bin
//     collation (255 characters hold the 255 bytes that outbox.Message
//     allows). utf8mb4_bin is exact except that it ignores trailing spaces
//     (PAD SPACE; the NO PAD collations differ between MySQL and MariaDB),
//     so Stats, Dead and Replay also compare lengths. An index on one of
//     them takes at most 1,022 bytes of InnoDB's 3,072.
//   - payload is LONGBLOB: opaque bytes, not JSON. headers is JSON (MariaDB
//     stores it as LONGTEXT checked by JSON_VALID).
//   - MySQL has no partial indexes, so status leads the claim index
//     (status, available_at, seq): pending rows are one contiguous range in
//     claim order, and a claim reads no published or dead row. status is
//     1 published, 2 dead, 3 pending (PostgreSQL's store has 0 pending):
//     pending sorts last because InnoDB locks the record that ends a locking
//     range scan, even under READ COMMITTED, so what follows the due rows
//     must be rows not yet due or the end of the index, never a published or
//     dead row that Purge or Replay would then wait for.
//   - (status, key, seq) finds a key's head, its oldest pending row: the
//     first entry of (pending, key). key is at most 1,020 bytes of it.
//   - The key-lock table, <table>_keys (key_hash BIGINT PRIMARY KEY, n
//     BIGINT), holds a row per key ever enqueued (see Ordering).
//   - published_at alone indexes Purge: only published rows have one, and
//     NULLs sort first. There is no index for Dead, which scans the dead
//     rows: they are few, and every index costs each Enqueue.
//
// Migrate runs CREATE TABLE IF NOT EXISTS with the indexes inside it, so it
// is idempotent and safe to run from relays starting together. It creates
// the key-lock table the same way.
//
// # Claims
//
// Claim takes a connection of its own (db.Conn) and, on it, one statement
// that sets the session up for the claim, a transaction, and
//
//	SELECT … WHERE status = 3 AND available_at <= ?
//	ORDER BY available_at, seq LIMIT ? FOR UPDATE SKIP LOCKED
//
// on the (status, available_at, seq) index when ClaimParams.Unordered; by
// default, the keys' heads as described under Ordering. Either way rows
// another relay holds are skipped, never waited for. The transaction stays
// open while the relay
// publishes. Complete applies the outcome in one statement per kind and
// commits; Abort rolls back. Each statement names its rows in one JSON
// array parameter, turned into rows by JSON_TABLE and joined to the unique
// id (FORCE INDEX, STRAIGHT_JOIN): one short statement whatever the number
// of rows, no placeholder limit, per-row values (errors, next attempt
// times) in the same array, and a plan that looks each row up by its key.
// "WHERE id IN (…)" is not used because the optimizer turns it into a
// table scan on small tables (and on MariaDB past 1,000 values), and a
// locking scan waits for every row a claim holds: it deadlocked concurrent
// relays and purges.
//
// The claim's session runs READ COMMITTED: under REPEATABLE READ (the
// default) the locking read would also lock the gaps next to the pending
// rows and hold every Enqueue that lands there until the relay finishes
// publishing. It sets innodb_lock_wait_timeout to at most 5 seconds, since
// nothing in a claim should wait for a row lock. And it bounds the claim
// like PostgreSQL's idle_in_transaction_session_timeout does, so that a
// relay that stalls (SIGSTOP, a long pause) loses its rows to the others
// after Config.ClaimTimeout:
//
//   - on MariaDB with idle_transaction_timeout, which kills a connection
//     idle that long inside a transaction;
//   - on MySQL, which has no such timeout, with wait_timeout, which kills a
//     connection idle that long, in a transaction or not (the claim's
//     connection is in one throughout).
//
// The store tells them apart by VERSION() on its first claim. Both count
// whole seconds: ClaimTimeout is rounded up. Replay and Purge also run READ
// COMMITTED, Purge with SKIP LOCKED. The previous session values
// are saved in user variables by the same statement and restored before the
// connection returns to the pool, so the application's transactions on a
// shared *sql.DB keep their isolation and timeouts; a connection that
// cannot be restored is closed instead.
//
// # Ordering
//
// Events with the same non-empty Key are published in the order their
// transactions committed, one at a time (ClaimParams.Unordered turns this
// off). A claim takes a keyed event only when it is its key's head: no
// pending event of the key has a lower seq, due or not. It first lists the
// heads of up to twice the batch's keys with a loose index scan of the
// (status, key, seq) index — one dive per key, a plain read that locks
// nothing — walking the keys round-robin from where the last claim of the
// process stopped, so no key starves; then it locks those heads by primary
// key with FOR UPDATE SKIP LOCKED, rechecking that each is still pending
// and due. The comment of lockHeadsSQL argues why this never takes a key's
// second event while its head is in flight, waiting for a retry or not yet
// due. So a key whose head waits, waits as a whole, and other keys go on;
// Store.DeadLetter lets a key go past a head that keeps failing. Unkeyed
// events fill the rest of the batch, oldest first (blankClaimSQL, which
// also orders the rare keys made of spaces only). A claim's cost follows
// the number of keys it lists, not the depth of their backlogs.

// Commit order per key comes from the write side. AUTO_INCREMENT hands
// seqs out at insert, so two transactions enqueueing for one key could
// commit in the other order than their seqs. So Enqueue first upserts a
// row per distinct key of the call (a hash of the key) into the key-lock
// table, in hash order, then inserts; the row locks last until the
// transaction ends. A second writer of the same key waits in its Enqueue
// until the first commits or rolls back, then takes a higher seq. In
// short: writers of one key serialize from Enqueue to commit, so keep
// what follows Enqueue in such transactions short. Writers of different
// keys do not wait for each other (unless two keys' hashes collide, which
// only costs a wait). One Enqueue takes its keys in one global order, so
// Enqueues alone do not deadlock; a transaction that enqueues several keys
// in several calls, or locks other rows after Enqueue, can deadlock with
// one that does so in another order, and InnoDB rolls one of them back
// (error 1213). Enqueue a transaction's keyed events in one call to avoid
// it.
//
// # What MySQL lacks
//
// There is no LISTEN/NOTIFY: Store does not implement stores.Listener, and
// relays find new events by polling (relay.Config.PollInterval; 100ms is a
// reasonable setting here, each idle poll being one indexed read). A program
// that runs its relay in the same process wakes it at once after each
// commit that enqueued, with relay.Relay.Wake:
//
//	if err := tx.Commit(); err == nil {
//		r.Wake()
//	}
package mysql
