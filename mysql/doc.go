// Package mysql is the outbox in MySQL 8+ and MariaDB 10.6+, over
// database/sql with github.com/go-sql-driver/mysql: the write side, the
// relay's store and the consumer's inbox, behind one New.
//
//	d, err := mysql.New(db, nil) // tables outbox_messages and outbox_inbox
//	err = d.Migrate(ctx)
//
//	// Producer: enqueue in the business transaction.
//	ob := outbox.New(d, nil)
//	tx, _ := db.BeginTx(ctx, nil)
//	// … the business change …
//	err = ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: body})
//	// … tx.Commit()
//
//	// Relay: claim, publish, mark.
//	r, err := relay.New(d.Store(), publisher, nil)
//
//	// Consumer: each message's effects once, however often it arrives.
//	in := inbox.New(d.Inbox(), nil)
//	outcome, err := in.Handle(ctx, msg, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
//		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance + 10 WHERE id = ?`, m.Key)
//		return err
//	})
//
// DB is an outbox.Driver[*sql.Tx]: Enqueue inserts the events in the
// caller's transaction, in one INSERT (several for more than 8191 events
// or a few MiB of payload). DB.Store is the relay's side, a stores.Store.
// DB.Inbox is an inbox.Driver[*sql.Tx], usually in another service's
// database: the producer's and the consumer's DB need not be the same.
//
// Importing the package also registers the URL scheme mysql:// with
// package backend, for tools that open a database by URL (the outbox
// command): mysql://user:pass@host:3306/db, the query parameters being
// go-sql-driver/mysql's own.
//
// # Connections
//
// The tables live in the database the connection uses (there is no schema
// level to configure); Config.Table names the outbox table, default
// outbox_messages, and Config.InboxTable the inbox table, default
// outbox_inbox.
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
// # Migrations
//
// Each table has numbered migrations, up and down (Migrations lists them;
// migrations/ holds them as plain SQL for the default names, for goose,
// golang-migrate or atlas: give each table's files a directory of their
// own there, as both sequences start at 1). Version 1 of the outbox table
// is the table, its indexes and its key-lock table; version 1 of the inbox
// table is the inbox table. DB.Migrate applies the pending migrations of
// both tables in order (Store.Migrate and Inbox.Migrate, those of one) and
// records each table's version in the table outbox_schema_versions (one
// row per table: table_name, version, applied_at); a table that exists
// without a row there is at version 1, as every table made before versions
// were recorded is. Migrate is idempotent and safe to run from relays
// starting together: they take turns on a lock of the database
// (GET_LOCK), and each finds the others' work done. MigrateDown goes back,
// SchemaVersions says where each table stands, and SchemaSQL is the whole
// schema as one script.
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
// array, turned into rows by JSON_TABLE and joined to the table (FORCE
// INDEX, STRAIGHT_JOIN): one short statement whatever the number of rows,
// no placeholder limit, per-row values (errors, next attempt times) in the
// same array, and a plan that looks each row up by its key. Published rows
// are named by primary key (the seqs the claim read, written into the
// statement, which goes out as text in one round trip); failures by the
// unique id, in a parameter.
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
// events come next, oldest first (blankClaimSQL, which also orders the
// rare keys made of spaces only, heads only). With ClaimParams.PerKey,
// unkeyed events take at most half the room the heads leave, and the rest
// goes to the runs after the first 256 heads the claim locked (fewer when
// the room would not give each at least 4 events), shared evenly among
// their keys: each key's next events
// in its order, listed along the same index (a plain read, a bounded range
// per key) and locked by primary key with FOR UPDATE SKIP LOCKED; a run
// ends at the first event held elsewhere, gone or not due. The comment of
// Store.runs argues why a run never holds an event out of turn: no other
// claim takes a key's events while the batch holds its head. A claim's
// cost follows the number of keys it lists and the events it takes, not
// the depth of their backlogs.
//
// A batch whose claim reached every key due and free (the walk listed
// fewer heads than it may, the heads left room, and every key got its
// share of it) implements stores.Continuer: while the relay publishes it,
// Continue claims, on a second connection and in a transaction of its
// own, the events right after the runs that took all they could — one
// range of the (status, key, seq) index per key, locked by primary key as
// runs are — so that a few busy keys go on at once after the batch
// completes, with no claim in between. The batch still holds each key's
// events up to where the continuation starts, so no other claim takes
// them (batch.Continue has the argument). Continue takes nothing when the
// pool has no connection free (SetMaxOpenConns reached and none idle): a
// relay's pool needs two connections per worker for it. Resume, before the
// relay publishes a continuation, is one round trip in its transaction
// and fails if the server ended it meanwhile.
//
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
//
// # Inbox
//
// An inbox record is one row: id BINARY(16) PRIMARY KEY (the event's
// UUIDv7, as the outbox table stores it), topic TEXT, received_at
// DATETIME(6) in UTC with an index for Purge. Times go in as text the
// package formats itself, so they are UTC whatever the DSN's loc and the
// session's time_zone say.
//
// RecordTx inserts the row with a plain INSERT in the handler's
// transaction. A duplicate fails with a duplicate-key error (1062), which
// RecordTx reports as "not inserted"; InnoDB rolls back only that
// statement. Every other error is returned, so a bad value or a missing
// table (inbox.ErrSchemaMissing) is never taken for a duplicate, as it
// would be with INSERT IGNORE.
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
// The inbox's Purge runs READ COMMITTED: it locks the oldest records on the
// received_at index with FOR UPDATE SKIP LOCKED, so concurrent purges do
// not wait for each other, and deletes them by primary key in the same
// short transaction.
package mysql
