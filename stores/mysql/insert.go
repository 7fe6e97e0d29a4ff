package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxgo/outbox"
)

// insertCols is the number of placeholders per inserted row.
const insertCols = 8

// maxInsertRows keeps an INSERT under MySQL's 65535 placeholders; a larger
// Enqueue goes in chunks, still inside the caller's transaction.
const maxInsertRows = maxPlaceholders / insertCols

// insertSQL builds the INSERT for n rows. The table name comes from a
// validated Config; values are always placeholders.
func insertSQL(table string, n int) string {
	const row = "(?,?,?,?,?,?,?,?)"
	var b strings.Builder
	b.Grow(100 + n*(len(row)+1))
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (id, topic, `key`, type, payload, headers, created_at, available_at) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// insertArgs flattens msgs into parameters in the order insertSQL expects,
// and returns each row's size in bytes, for chunking.
func insertArgs(msgs []outbox.Message) (args []any, sizes []int, err error) {
	args = make([]any, 0, len(msgs)*insertCols)
	sizes = make([]int, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		var headers any // SQL NULL when there are none
		size := 16 + len(m.Topic) + len(m.Key) + len(m.Type) + len(m.Payload) + 2*26
		if len(m.Headers) > 0 {
			h, err := json.Marshal(m.Headers)
			if err != nil {
				return nil, nil, fmt.Errorf("mysql: headers: %w", err)
			}
			headers = string(h)
			size += len(h)
		}
		available := m.CreatedAt
		if m.NotBefore.After(available) {
			available = m.NotBefore
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{} // NOT NULL; the driver sends a nil slice as NULL
		}
		args = append(args, m.ID[:], m.Topic, m.Key, m.Type, payload, headers, dbTime(m.CreatedAt), dbTime(available))
		sizes[i] = size
	}
	return args, sizes, nil
}

// Driver enqueues through database/sql with github.com/go-sql-driver/mysql:
// outbox.New(driver) gives an *outbox.Outbox[*sql.Tx].
type Driver struct {
	cfg     Config
	table   string
	insert1 string // the INSERT for one row, the common case
}

var _ outbox.Driver[*sql.Tx] = (*Driver)(nil)

// NewDriver returns the write side for the table cfg names (nil:
// outbox_messages).
func NewDriver(cfg *Config) (*Driver, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	t := c.quotedTable()
	return &Driver{cfg: c, table: t, insert1: insertSQL(t, 1)}, nil
}

// InsertTx implements outbox.Driver: one INSERT for up to maxInsertRows
// messages (and a few MiB of values), more in chunks.
func (d *Driver) InsertTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	if tx == nil {
		return outbox.ErrNoTransaction
	}
	args, sizes, err := insertArgs(msgs)
	if err != nil {
		return err
	}
	return chunks(len(msgs), maxInsertRows, func(i int) int { return sizes[i] }, func(lo, hi int) error {
		q := d.insert1
		if hi-lo != 1 {
			q = insertSQL(d.table, hi-lo)
		}
		if _, err := tx.ExecContext(ctx, q, args[lo*insertCols:hi*insertCols]...); err != nil {
			return insertError(err)
		}
		return nil
	})
}

// insertError names what went wrong in the caller's terms.
func insertError(err error) error {
	switch {
	case errors.Is(err, sql.ErrTxDone):
		return fmt.Errorf("%w: %w", outbox.ErrNoTransaction, err)
	case isSchemaMissing(err):
		return fmt.Errorf("%w: %w", outbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("mysql: enqueue: %w", err)
}
