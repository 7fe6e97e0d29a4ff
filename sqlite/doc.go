// Package sqlite is the outbox for SQLite: in one database file, the
// write side (enqueue, in the caller's transaction), the relay's store
// (claim, complete, dead letters, stats) and the consumer's inbox
// (deduplication, in the handler's transaction). New gives one DB over a
// database/sql handle that serves all three:
//
//	sdb, err := sqlite.Open("app.db")   // WAL, busy timeout, fair writers
//	db, err := sqlite.New(sdb, nil)      // outbox_messages, outbox_inbox
//	err = db.Migrate(ctx)                // both tables, to the latest version
//
//	// Enqueue: db is an outbox.Driver[*sql.Tx].
//	ob := outbox.New(db, nil)
//	tx, err := sdb.BeginTx(ctx, nil)
//	// … the business change …
//	err = ob.Enqueue(ctx, tx, outbox.Message{Topic: "orders", Payload: p})
//	err = tx.Commit()
//
//	// Relay: db.Store() is a stores.Store and a stores.Listener.
//	r, err := relay.New(db.Store(), publisher, nil)
//
//	// Consume: db.Inbox() is an inbox.Driver[*sql.Tx].
//	in := inbox.New(db.Inbox(), nil)
//	outcome, err := in.Handle(ctx, msg, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
//		// the effect, in tx
//	})
//
// Importing the package also registers the sqlite: URL scheme with package
// backend (sqlite:///abs/path.db, sqlite:/abs/path.db, sqlite://rel/path.db
// or sqlite:rel.db), for tools such as the outbox command.
//
// It needs SQLite 3.41 or later (STRICT tables, RETURNING, UPDATE … FROM,
// the ->> operator, unhex). Open uses modernc.org/sqlite, pure Go; New works
// with any database/sql SQLite driver recent enough.
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
// under load means a transaction held the lock that long. The package's own
// write transactions (the store's claims and completions, the inbox's
// purges, Migrate) wait the same way, on whatever handle they are given, so
// relays in other processes get their share of the lock too.
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
// off). A claim starts a key at its head, the key's pending event with the
// lowest seq, due or not, and takes it only when it is due and its lease is
// free: while a key's head is leased to a relay, or waits for a retry or
// its NotBefore, the whole key waits, and other keys go on.
// Store.DeadLetter lets a key go past a head that keeps failing. Claims
// walk the keys along an index of pending keyed events, round-robin from
// where the last claim stopped, and stop once they have enough heads (the
// batch's limit; with ClaimParams.PerKey, a quarter of it, leaving keys to
// other relays and workers): the cost of a claim grows with the keys it
// visits, not with the backlog behind them. Unkeyed events take up to half
// the room the heads left (all of it without PerKey), oldest first. With
// PerKey, the rest goes to the runs after the heads claimed, shared evenly
// among their keys: each key's pending events right after its head, in the
// key's order, as long as each is due and not leased, up to PerKey events
// of the key, leased by the same write transaction as the head. A run stops
// at the first event that is not claimable, so a batch never holds an event
// of a key past one it left out; a claim looks at no more than PerKey
// events of a key, however deep its backlog.
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
// # Inbox
//
// A record is one row (id, topic, received_at) of the inbox table,
// inserted with INSERT … ON CONFLICT (id) DO NOTHING in the handler's
// transaction; the rows it affected (one or none) say whether the message
// is new. With _txlock=immediate (Open sets it) every transaction RunTx
// begins takes the write lock at BEGIN, waiting its turn: a concurrent
// duplicate waits until the first delivery's transaction ends, and then
// sees its record, or none if it rolled back. With deferred transactions
// the answer is the same, but a transaction that reads before it writes
// may fail with SQLITE_BUSY instead of waiting (the subscriber redelivers
// it). Keep the inbox in the database of the handler's own tables: its
// record and the handler's effects then commit together.
//
// # Migrations
//
// Each table's schema is a numbered series of migrations, up and down.
// Migrate applies, in one IMMEDIATE transaction, those newer than the
// version recorded in the outbox_schema_versions table (one row per table:
// its name, version and applied_at), and records the new version; relays
// and consumers migrating at once take turns, and the later ones find
// nothing to do. A table created before versions were recorded (by an
// earlier release, or by hand from migrations/) counts as version 1.
// (*DB).Migrate migrates both tables, Store.Migrate the outbox table,
// Inbox.Migrate the inbox table; MigrateDown goes back, SchemaVersions
// tells where each table is. Migrations returns the steps rendered for
// your table names, SchemaSQL the whole up script (version rows included),
// and migrations/ holds the steps as plain SQL files, for teams that
// migrate with goose, golang-migrate or atlas.
//
// # Storage
//
// Ids are 16-byte BLOBs, headers a JSON object as TEXT, times INTEGER
// microseconds since the Unix epoch (UTC): CreatedAt and NotBefore
// round-trip at microsecond precision, as with PostgreSQL. The tables are
// STRICT.
package sqlite
