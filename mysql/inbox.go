package mysqlinbox

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/sqltx"
)

// Driver is an inbox table in a MySQL or MariaDB database, used through
// database/sql with github.com/go-sql-driver/mysql: inbox.New(driver) gives
// an *inbox.Inbox[*sql.Tx].
type Driver struct {
	db  *sql.DB
	cfg Config
	sql statements
}

var _ inbox.Driver[*sql.Tx] = (*Driver)(nil)

// New returns the driver for the table cfg names (nil: outbox_inbox) in the
// database db connects to. db stays the caller's to close.
func New(db *sql.DB, cfg *Config) (*Driver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("mysqlinbox: nil db")
	}
	st, err := newStatements(c)
	if err != nil {
		return nil, err
	}
	return &Driver{db: db, cfg: c, sql: st}, nil
}

// Config returns the driver's configuration with defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// Migrate creates the inbox table idempotently (CREATE TABLE IF NOT EXISTS,
// with the index inside it), so consumers starting together may all run it.
func (d *Driver) Migrate(ctx context.Context) error {
	for _, q := range d.sql.migrate {
		if _, err := d.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("mysqlinbox: migrate: %w", err)
		}
	}
	return nil
}

// RunTx implements inbox.Driver. The transaction has db's default isolation
// (REPEATABLE READ unless the server or the DSN says otherwise).
func (d *Driver) RunTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqltx.Run(ctx, d.db, "mysqlinbox", fn)
}

// RecordTx implements inbox.Driver: one INSERT, and a duplicate key (error
// 1062) means the message was recorded before. InnoDB rolls back only the
// failed statement, so tx stays usable. An insert that meets another
// transaction's uncommitted record of the same id waits for that
// transaction to end (up to innodb_lock_wait_timeout), then fails as a
// duplicate or inserts.
func (d *Driver) RecordTx(ctx context.Context, tx *sql.Tx, r inbox.Record) (bool, error) {
	if tx == nil {
		return false, errors.New("mysqlinbox: nil transaction")
	}
	_, err := tx.ExecContext(ctx, d.sql.record, r.ID[:], topicText(r.Topic), dbTime(r.ReceivedAt))
	var myErr *mysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &myErr) && myErr.Number == erDupEntry:
		return false, nil
	}
	return false, wrap("record", err)
}

// Purge implements inbox.Driver. In one READ COMMITTED transaction it locks
// the oldest records with SKIP LOCKED, so purges running at once share the
// work instead of waiting for each other (and skip a record a duplicate
// delivery is checking), then deletes them by primary key.
func (d *Driver) Purge(ctx context.Context, before time.Time, limit int) (n int64, err error) {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, wrap("purge", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	ids, err := d.purgeIDs(ctx, tx, before, limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	for lo := 0; lo < len(ids); lo += maxDeleteRows {
		res, err := tx.ExecContext(ctx, d.sql.purgeDelete, idsJSON(ids[lo:min(lo+maxDeleteRows, len(ids))]))
		if err != nil {
			return 0, wrap("purge", err)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, wrap("purge", err)
		}
		n += k
	}
	if err := tx.Commit(); err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}

// purgeIDs locks and returns the ids of up to limit records received before
// before, oldest first.
func (d *Driver) purgeIDs(ctx context.Context, tx *sql.Tx, before time.Time, limit int) ([][]byte, error) {
	rows, err := tx.QueryContext(ctx, d.sql.purgeSelect, dbTime(before), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids [][]byte
	for rows.Next() {
		var id []byte
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// maxDeleteRows is how many ids one DELETE of Purge names.
const maxDeleteRows = 10000

// idsJSON returns ids as a JSON array of hex strings: one parameter, turned
// into rows by JSON_TABLE (MySQL 8.0.4+, MariaDB 10.6+) and joined to the
// primary key. A plain "WHERE id IN (…)" may be planned as a table scan (on
// a small table, or past 1,000 values on MariaDB), and a locking scan would
// wait for every record an in-flight delivery holds.
func idsJSON(ids [][]byte) string {
	b := make([]byte, 0, 2+len(ids)*35)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = hex.AppendEncode(b, id)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// datetimeLayout is how DATETIME(6) values go in, as text.
const datetimeLayout = "2006-01-02 15:04:05.000000"

// dbTime is t as received_at stores it: UTC, truncated to the microsecond,
// as text, so that the value does not depend on the DSN's loc or the
// session's time_zone (the driver runs on the application's connections).
func dbTime(t time.Time) string { return t.UTC().Format(datetimeLayout) }

// maxTopicLen is what the topic column (TEXT) holds, in bytes.
const maxTopicLen = 65535

// topicText makes a topic storable: valid UTF-8 (the server rejects
// anything else) and no longer than the column. The topic is for people
// reading the table; no message should fail for it.
func topicText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxTopicLen {
		return s
	}
	n := maxTopicLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Server error numbers.
const (
	erDupEntry    = 1062 // ER_DUP_ENTRY
	erNoSuchTable = 1146 // ER_NO_SUCH_TABLE
)

// wrap names the operation and marks a missing table.
func wrap(op string, err error) error {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == erNoSuchTable {
		return fmt.Errorf("mysqlinbox: %s: %w: %w", op, inbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("mysqlinbox: %s: %w", op, err)
}
