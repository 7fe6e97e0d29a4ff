package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Inbox is the inbox table used through pgx: it implements
// inbox.Driver[pgx.Tx]. Get it from DB.Inbox.
//
// A record is one row (id, topic, received_at), inserted with
// INSERT … ON CONFLICT (id) DO NOTHING in the handler's transaction: a
// concurrent duplicate blocks on the first transaction's uncommitted row and
// then sees the conflict.
type Inbox struct {
	pool *pgxpool.Pool
	mig  *migrator
	sql  inboxStatements
}

// Migrate brings the inbox table alone to the latest schema version, for a
// consumer that has no outbox (DB.Migrate does both tables).
func (in *Inbox) Migrate(ctx context.Context) error {
	return in.mig.up(ctx, pgxBegin(in.pool), in.mig.inbox)
}

// RunTx implements inbox.Driver.
func (in *Inbox) RunTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, in.pool, fn)
}

// RecordTx implements inbox.Driver.
func (in *Inbox) RecordTx(ctx context.Context, tx pgx.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errNilInboxTx
	}
	tag, err := tx.Exec(ctx, in.sql.record, r.ID.String(), topicText(r.Topic), r.ReceivedAt.UTC())
	if err != nil {
		return false, inboxWrap("record", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Purge implements inbox.Driver. Records another purge has locked are
// skipped.
func (in *Inbox) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	tag, err := in.pool.Exec(ctx, in.sql.purge, before.UTC(), limit)
	if err != nil {
		return 0, inboxWrap("purge", err)
	}
	return tag.RowsAffected(), nil
}

// SQLInbox is the inbox table used through database/sql: it implements
// inbox.Driver[*sql.Tx], on the same table as Inbox. Get it from
// SQLDB.Inbox.
type SQLInbox struct {
	db  *sql.DB
	mig *migrator
	sql inboxStatements
}

// Migrate brings the inbox table alone to the latest schema version (see
// Inbox.Migrate).
func (in *SQLInbox) Migrate(ctx context.Context) error {
	return in.mig.up(ctx, sqlBegin(in.db), in.mig.inbox)
}

// RunTx implements inbox.Driver.
func (in *SQLInbox) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, in.db, "postgres: inbox", fn)
}

// RecordTx implements inbox.Driver.
func (in *SQLInbox) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errNilInboxTx
	}
	res, err := tx.ExecContext(ctx, in.sql.record, r.ID.String(), topicText(r.Topic), r.ReceivedAt.UTC())
	if err != nil {
		return false, inboxWrap("record", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, inboxWrap("record", err)
	}
	return n == 1, nil
}

// Purge implements inbox.Driver.
func (in *SQLInbox) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := in.db.ExecContext(ctx, in.sql.purge, before.UTC(), limit)
	if err != nil {
		return 0, inboxWrap("purge", err)
	}
	return res.RowsAffected()
}

var errNilInboxTx = errors.New("postgres: inbox: nil transaction")

// inboxStatements are the SQL the inbox drivers run, built once from a
// validated Config.
type inboxStatements struct {
	record, purge string
}

func newInboxStatements(c Config) inboxStatements {
	t := c.names().inbox
	return inboxStatements{
		record: `INSERT INTO ` + t + ` (id, topic, received_at) VALUES ($1::uuid, $2, $3) ON CONFLICT (id) DO NOTHING`,
		purge: `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t +
			` WHERE received_at < $1 ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
}

// topicText makes a topic storable in the text column: valid UTF-8
// without NUL, both of which PostgreSQL refuses, each bad byte replaced by
// U+FFFD. The topic is for people reading the table; no message should
// fail for it.
func topicText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// inboxWrap names the operation and marks a missing table with
// inbox.ErrSchemaMissing.
func inboxWrap(op string, err error) error {
	if isSchemaMissing(err) {
		return fmt.Errorf("postgres: inbox %s: %w: %w", op, inbox.ErrSchemaMissing, err)
	}
	return sqlkit.Wrap("postgres", "inbox "+op, err, nil)
}
