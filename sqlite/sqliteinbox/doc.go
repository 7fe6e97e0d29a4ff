// Package sqliteinbox stores inbox records in SQLite: New gives an
// inbox.Driver[*sql.Tx] over a *sql.DB, for inbox.New.
//
//	db, err := sqlite.Open("stock.db") // stores/sqlite: WAL, busy timeout, BEGIN IMMEDIATE
//	drv, err := sqliteinbox.New(db, nil)
//	err = drv.Migrate(ctx)
//	in := inbox.New(drv, nil)
//	outcome, err := in.Handle(ctx, msg, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
//		// the effect, in tx
//	})
//
// A record is one row (id, topic, received_at), inserted with
// INSERT … ON CONFLICT (id) DO NOTHING in the handler's transaction; the
// rows it affected (one or none) say whether the message is new.
//
// # Transactions
//
// SQLite has one writer at a time. Open the database with stores/sqlite's
// Open (or the settings its package documentation lists): with
// _txlock=immediate every transaction RunTx begins takes the write lock at
// BEGIN (BEGIN IMMEDIATE), waiting its turn under the busy timeout. A
// concurrent duplicate therefore waits until the first delivery's
// transaction ends, and then sees its record, or none if it rolled back.
// With deferred transactions the answer is the same, but a transaction
// that reads before it writes may fail with SQLITE_BUSY instead of waiting
// (the subscriber redelivers it).
//
// Migrate creates the table; migrations/ holds the same DDL as plain SQL
// for goose, golang-migrate or atlas.
package sqliteinbox
