// Package postgres is the PostgreSQL backend of the outbox: enqueue in the
// business transaction, the relay's store, and the inbox, on one pgx pool.
//
// # One object per pool
//
// New returns a *DB for a *pgxpool.Pool and a Config naming the tables
// (nil: outbox.messages and outbox.inbox):
//
//	db, err := postgres.New(pool, nil)
//	err = db.Migrate(ctx)                      // both tables, to the latest version
//	ob := outbox.New(db, nil)                  // enqueue: *outbox.Outbox[pgx.Tx]
//	r, err := relay.New(db.Store(), pub, nil)  // drain to a broker
//	in := inbox.New(db.Inbox(), nil)           // deduplicate on the consumer side
//
// Enqueue writes the events in the caller's pgx.Tx, with the business
// change, and a NOTIFY at commit wakes the relays (LISTEN/NOTIFY, debounced:
// see Config.NotifyDebounce); they poll as well, so a lost notification
// costs latency only. Events with a key are published one at a time per
// key, in the order their transactions committed, across any number of
// relays: enqueueing takes a transaction-scoped advisory lock per key, and
// a claim takes each key's oldest pending event only, with FOR UPDATE SKIP
// LOCKED, in a transaction bounded by Config.ClaimTimeout. That claim is a
// pgx.Tx, which in-process handlers (relay.Handlers[pgx.Tx]) join: their
// writes commit with the mark that the event is done.
//
// The inbox records each handled message's ID in the handler's
// transaction: a redelivered message is a Duplicate, its effects not
// applied twice.
//
// # database/sql
//
// NewSQL returns a *SQLDB for a *sql.DB with any PostgreSQL driver
// (pgx's stdlib, lib/pq): enqueue in a *sql.Tx and the inbox over *sql.Tx,
// on the same tables. The relay's store is pgx only: run the relay on a
// pgxpool.Pool (stdlib.OpenDBFromPool gives a *sql.DB on the same pool).
//
// # Migrations
//
// Each table's schema is a numbered list of migrations, up and down
// (Migrations), recorded per table in VersionTable (table_name, version,
// applied_at). Migrate applies the pending ones in order in one
// transaction, under an advisory lock, so processes that start together
// take turns and the later ones find nothing to do; a table created before
// versioning is version 1. A table another transaction is using is waited
// for 2 s a try (lock_timeout), so that the application's writes are never
// held behind the migration for longer; the transaction is then rolled
// back and tried again, eight times in about a minute, before Migrate
// fails naming the table. MigrateDown goes back, SchemaVersions reports.
// SchemaSQL is the whole schema as one script (`outbox migrate --print`);
// the directory migrations/ holds each step as a plain SQL file for the
// default names, for goose, golang-migrate or atlas.
//
// # By URL
//
// Importing the package registers the schemes postgres:// and
// postgresql:// with package backend, for programs that pick their
// database by URL (the outbox CLI).
package postgres
