// Package pginbox stores inbox records in PostgreSQL: NewPgx for pgx v5
// (transactions of type pgx.Tx over a *pgxpool.Pool), NewSQL for
// database/sql (*sql.Tx over a *sql.DB, with any PostgreSQL driver).
//
// A record is one row (id, topic, received_at), inserted with
// INSERT … ON CONFLICT (id) DO NOTHING in the handler's transaction: a
// concurrent duplicate blocks on the first transaction's uncommitted row and
// then sees the conflict. A topic that PostgreSQL's text refuses (invalid
// UTF-8, NUL bytes) is stored with U+FFFD in place of each bad byte rather
// than failing the message. Migrate creates the table; migrations/ holds the
// same DDL as plain SQL for goose, golang-migrate or atlas.
package pginbox
