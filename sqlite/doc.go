// Package sqlite is the SQLite store: the write side (Driver, an
// outbox.Driver[*sql.Tx]) and the relay side (Store, a stores.Store) of an
// outbox table in a SQLite database file.
//
//	db, err := sqlite.Open("app.db")
//	store, err := sqlite.New(db, nil)   // relay side
//	err = store.Migrate(ctx)
//	drv, err := sqlite.NewDriver(nil)   // write side
//	ob := outbox.New(drv, nil)
//	tx, err := db.BeginTx(ctx, nil)
//	// … the business change …
//	err = ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: p})
//	err = tx.Commit()
//
// It needs SQLite 3.41 or later (STRICT tables, RETURNING, UPDATE … FROM,
// the ->> operator, unhex). Open uses modernc.org/sqlite, pure Go; New and
// NewDriver work with any database/sql SQLite driver recent enough.
//
// # Connection settings
//
// Open sets what the outbox relies on. If you open the database yourself,
// set the same on every connection (with modernc.org/sqlite, DSN returns
// them as a data source name):
//
//   - journal_mode=WAL. Readers do not block the writer nor the writer
//     readers: relays polling, Stats and Dead never stall an enqueue. It is
//     a property of the file, so every process sharing it gets it.
//   - busy_timeout=30000 (milliseconds, or more). SQLite has one writer at a
//     time; without a busy timeout a writer that finds the lock taken fails
//     at once with SQLITE_BUSY instead of waiting its turn. On a handle
//     from Open it bounds how long BeginTx waits for the write lock (see
//     Writers).
//   - _txlock=immediate (a driver setting, modernc and mattn): BeginTx
//     issues BEGIN IMMEDIATE, taking the write lock at BEGIN. A deferred
//     transaction that reads and then writes fails with SQLITE_BUSY at its
//     first write when another connection committed in between, and no
//     busy timeout helps. The store's own write transactions are IMMEDIATE
//     whatever this setting says.
//   - synchronous=FULL (SQLite's default, unless your build changed it).
//     With NORMAL in WAL mode, a power loss can roll back the last commits;
//     if the relay had already published their events, consumers would see
//     events of transactions that no longer exist.
//   - foreign_keys=ON is for your own tables; the outbox table has no
//     foreign keys.
//
// WAL checkpoints are SQLite's default: a passive checkpoint by the commit
// that takes the WAL past 1000 pages (wal_autocheckpoint). A passive
// checkpoint never waits for readers nor blocks writers, and relays read
// in short statements, so checkpoints keep up and the WAL stays at a few
// megabytes under a steady load.
//
// # Writers
//
// SQLite has one write lock and no queue for it: a connection that finds it
// taken sleeps in its busy handler (1, 2, 5 … then 100 ms between tries)
// while the writer that just committed begins again at once. Under steady
// load, a waiter may then wait for seconds and fail with SQLITE_BUSY once
// the busy timeout runs out, though every transaction is short; and so may
// a relay's claim or completion.
//
// Open your application's handle with Open, and begin write transactions
// with BeginTx (as outbox.Enqueue's callers do). Open's connections take
// their turn fairly: the write transactions of one process on a database
// file queue in the order they arrive, on every handle Open returned for
// that path, and the one at the head of the queue tries for the lock about
// once a millisecond (at once when a transaction of its process ends),
// leaving the queue as soon as it holds the lock. A writer then waits for
// the transactions before it, not for luck; BeginTx fails only when it has
// not got the lock within the busy timeout (or its context ended), which
// under load means a transaction held the lock that long. The store's own
// write transactions wait the same way, on whatever handle they are given,
// so relays in other processes get their share of the lock too.
//
// A COMMIT holds the lock through its fsync of the WAL (synchronous=FULL):
// a disk that stalls an fsync stalls every writer behind it, and on a
// machine whose disk is saturated by others a stall of tens of seconds has
// been seen. No queueing helps then; a longer busy timeout only waits
// longer.
//
// A handle opened otherwise (sql.Open with DSN's settings, or another
// driver) works, with SQLite's busy handler for its writers: set
// busy_timeout generously (30000), keep write transactions short, and
// expect an occasional SQLITE_BUSY under sustained write load. Read-only
// transactions (sql.TxOptions{ReadOnly: true}) and statements outside a
// transaction do not queue on either kind of handle.
//
// # Claims
//
// SQLite has one writer and no SKIP LOCKED, and a write transaction held
// open while a relay publishes would stall every enqueuer for a broker round
// trip. So a claim is a lease: one short write transaction stamps up to
// Limit due rows with a random token and locked_until = Now +
// ClaimTimeout, and returns them (see Ordering for which rows). Complete
// applies the outcome in one short transaction to the rows that still hold
// the token and clears it; Abort clears it. A relay that dies leaves its
// rows leased until ClaimTimeout passes; then the next claim takes them.
//
// A claim waits for the write lock until its context ends, for at most
// half of ClaimTimeout (its lease runs from ClaimParams.Now); a claim that
// finds nothing due costs one read and never takes the lock. Complete waits
// for the lock as long as the batch's lease lasts: a busy database delays
// the outcome, it does not give the batch back to be published again. Only
// when the lock stayed taken until the lease ended does Complete fail (the
// relay logs it as a store error), and another relay may then publish the
// batch again.
//
// This works the same for relays in one process and for relays in several
// processes sharing one database file (on a local file system: SQLite's
// locking is not reliable on network file systems).
//
// # Ordering
//
// Events with the same non-empty Key are published in the order their
// transactions committed, one at a time (ClaimParams.Unordered turns this
// off). A claim takes a keyed event only when it is its key's head, the
// key's pending event with the lowest seq, due or not, and only when that
// head's lease is free: while a key's head is leased to a relay, or waits
// for a retry or its NotBefore, the whole key waits, and other keys go on.
// Store.DeadLetter lets a key go past a head that keeps failing. Claims
// walk the keys along an index of pending keyed events, round-robin from
// where the last claim stopped, and stop once the batch is full: the cost
// of a claim grows with the keys it visits, not with the backlog behind
// them. Unkeyed events fill the rest of the batch, oldest first.
//
// Commit order per key needs nothing more. seq is the rowid, handed out at
// insert, and SQLite has one writer: a transaction that inserts holds the
// database's write lock from its first write (from BEGIN with
// _txlock=immediate) until it commits or rolls back. No other transaction
// can insert in between, so inserts, and the seqs they take, come in
// commit order. This holds for deferred transactions too (the write lock
// comes with the first write, and a rolled-back insert leaves no row
// behind), and across processes sharing the file.
//
// # Storage
//
// Ids are 16-byte BLOBs, headers a JSON object as TEXT, times INTEGER
// microseconds since the Unix epoch (UTC): CreatedAt and NotBefore
// round-trip at microsecond precision, as with PostgreSQL. The table is
// STRICT. migrations/ holds the schema as a plain SQL file for migration
// tools.
package sqlite
