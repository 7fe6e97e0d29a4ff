package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Inbox is the inbox table in a MySQL or MariaDB database: DB.Inbox
// returns it. It implements inbox.Driver[*sql.Tx], so inbox.New(d.Inbox(),
// nil) gives an *inbox.Inbox[*sql.Tx].
type Inbox struct {
	d   *DB
	db  *sql.DB
	sql inboxStatements
}

// inboxStatements are the SQL an Inbox runs, built once from a validated
// Config.
type inboxStatements struct {
	record, purgeSelect, purgeDelete string
}

func newInbox(d *DB) *Inbox {
	t := quote(d.cfg.InboxTable)
	return &Inbox{d: d, db: d.db, sql: inboxStatements{
		// A plain INSERT: a duplicate fails with ER_DUP_ENTRY, which
		// RecordTx tells apart from every other error. INSERT IGNORE would
		// also turn other errors (a value too long, bad UTF-8) into
		// warnings, and ON DUPLICATE KEY UPDATE reports a found row as one
		// affected row when the DSN sets clientFoundRows.
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES (?, ?, ?)`,
		// MySQL takes neither LIMIT in an IN subquery nor a locking
		// subquery on the table it deletes from: Purge selects the ids,
		// then deletes them by primary key (see sqlkit.IDsJSON).
		purgeSelect: `SELECT id FROM ` + t + ` FORCE INDEX (received_at)
			WHERE received_at < ? ORDER BY received_at LIMIT ? FOR UPDATE SKIP LOCKED`,
		purgeDelete: `DELETE t FROM JSON_TABLE(?, '$[*]' COLUMNS (id CHAR(32) PATH '$')) AS f
			STRAIGHT_JOIN ` + t + ` AS t FORCE INDEX (PRIMARY) ON t.id = UNHEX(f.id)`,
	}}
}

// Migrate brings the inbox table (not the outbox table; DB.Migrate does
// both) to the latest schema version. It is idempotent, and consumers
// starting together may all run it.
func (in *Inbox) Migrate(ctx context.Context) error {
	return in.d.migrate(ctx, in.d.inboxTables())
}

// RunTx implements inbox.Driver. The transaction has db's default isolation
// (REPEATABLE READ unless the server or the DSN says otherwise).
func (in *Inbox) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, in.db, "mysql: inbox", fn)
}

// RecordTx implements inbox.Driver: one INSERT, and a duplicate key (error
// 1062) means the message was recorded before. InnoDB rolls back only the
// failed statement, so tx stays usable. An insert that meets another
// transaction's uncommitted record of the same id waits for that
// transaction to end (up to innodb_lock_wait_timeout), then fails as a
// duplicate or inserts.
func (in *Inbox) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("mysql: inbox: nil transaction")
	}
	_, err := tx.ExecContext(ctx, in.sql.record, r.ID[:], topicText(r.Topic), dbTime(r.ReceivedAt))
	var myErr *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &myErr) && myErr.Number == erDupEntry:
		return false, nil
	}
	return false, wrapInbox("record", err)
}

// Purge implements inbox.Driver. In one READ COMMITTED transaction it locks
// the oldest records with SKIP LOCKED, so purges running at once share the
// work instead of waiting for each other (and skip a record a duplicate
// delivery is checking), then deletes them by primary key.
func (in *Inbox) Purge(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	tx, err := in.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, wrapInbox("purge", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	ids, err := in.purgeIDs(ctx, tx, before, limit)
	if err != nil {
		return 0, wrapInbox("purge", err)
	}
	for lo := 0; lo < len(ids); lo += maxStatementRows {
		res, err := tx.ExecContext(ctx, in.sql.purgeDelete, sqlkit.IDsJSON(ids[lo:min(lo+maxStatementRows, len(ids))]))
		if err != nil {
			return 0, wrapInbox("purge", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, wrapInbox("purge", err)
		}
		n += k
	}
	if err := tx.Commit(); err != nil {
		return 0, wrapInbox("purge", err)
	}
	return n, nil
}

// purgeIDs locks and returns the ids of up to limit records received before
// before, oldest first.
func (in *Inbox) purgeIDs(ctx context.Context, tx *sql.Tx, before time.Time, limit int) ([]uuid.UUID, error) {
	rows, err := tx.QueryContext(ctx, in.sql.purgeSelect, dbTime(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// maxTopicLen is what the topic column (TEXT) holds, in bytes.
const maxTopicLen = 65535

// topicText makes a topic storable: valid UTF-8 (the server rejects
// anything else) and no longer than the column. The topic is for people
// reading the table; no message should fail for it.
func topicText(s string) string { return storable(s, maxTopicLen) }

// erDupEntry is the server's ER_DUP_ENTRY.
const erDupEntry = 1062

// wrapInbox names the operation on the inbox table and marks a missing
// table inbox.ErrSchemaMissing.
func wrapInbox(op string, err error) error {
	if isSchemaMissing(err) {
		err = fmt.Errorf("%w: %w", inbox.ErrSchemaMissing, err)
	}
	return sqlkit.Wrap("mysql", "inbox "+op, err, nil)
}
