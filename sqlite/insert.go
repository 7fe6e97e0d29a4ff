package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
)

// SQLite takes at most 32766 parameters per statement (SQLITE_MAX_VARIABLE_
// NUMBER since 3.32); a larger Enqueue goes in chunks of this many rows,
// still inside the caller's transaction.
const (
	insertCols    = 8
	maxParams     = 32766
	maxInsertRows = maxParams / insertCols
)

// insertSQL builds the INSERT for n rows (n ≤ maxInsertRows). The table name
// comes from a validated Config; values are always parameters.
func insertSQL(table string, n int) string {
	const row = "(?,?,?,?,?,?,?,?)"
	var b strings.Builder
	b.Grow(100 + n*(len(row)+1))
	b.WriteString("INSERT INTO ")
	b.WriteString(table)
	b.WriteString(" (id, topic, key, type, payload, headers, created_at, available_at) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// insertArgs flattens msgs into parameters in the order insertSQL expects.
func insertArgs(msgs []outbox.Message) ([]any, error) {
	args := make([]any, 0, len(msgs)*insertCols)
	for _, m := range msgs {
		var headers any // SQL NULL when there are none
		if len(m.Headers) > 0 {
			h, err := headerjson.Marshal(m.Headers)
			if err != nil {
				return nil, fmt.Errorf("sqlite: headers: %w", err)
			}
			headers = string(h)
		}
		available := m.CreatedAt
		if m.NotBefore.After(available) {
			available = m.NotBefore
		}
		payload := m.Payload
		if payload == nil {
			payload = []byte{} // NOT NULL: an empty BLOB
		}
		args = append(args, m.ID[:], m.Topic, m.Key, m.Type, payload, headers,
			m.CreatedAt.UnixMicro(), available.UnixMicro())
	}
	return args, nil
}

// InsertTx implements outbox.Driver[*sql.Tx]: outbox.New(db) gives an
// *outbox.Outbox[*sql.Tx], whose Enqueue writes here, in the caller's
// transaction: one INSERT statement per 4095 messages. It works with any
// SQLite driver for database/sql (modernc.org/sqlite, mattn/go-sqlite3,
// ncruces/go-sqlite3).
//
// It takes no lock of its own for per-key order: the transaction holds
// SQLite's one write lock from its first write to its end, so seqs are
// taken in commit order (see the package documentation, "Ordering").
//
// Begin tx with _txlock=immediate (see Open): a deferred transaction that
// reads before it writes can fail with SQLITE_BUSY at its first write when
// another connection committed meanwhile, and no busy_timeout helps then.
func (d *DB) InsertTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	if tx == nil {
		return outbox.ErrNoTransaction
	}
	for len(msgs) > 0 {
		n := min(len(msgs), maxInsertRows)
		args, err := insertArgs(msgs[:n])
		if err != nil {
			return err
		}
		q := d.one
		if n > 1 {
			q = insertSQL(quote(d.cfg.Table), n)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return insertError(err)
		}
		msgs = msgs[n:]
	}
	return nil
}

// insertError names what went wrong in the caller's terms.
func insertError(err error) error {
	switch {
	case errors.Is(err, sql.ErrTxDone):
		return fmt.Errorf("%w: %w", outbox.ErrNoTransaction, err)
	case isSchemaMissing(err):
		return fmt.Errorf("%w: %w", outbox.ErrSchemaMissing, err)
	}
	return fmt.Errorf("sqlite: enqueue: %w", err)
}
