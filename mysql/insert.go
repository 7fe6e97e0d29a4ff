package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
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
			h, err := headerjson.Marshal(m.Headers)
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

// keyHashes returns the distinct non-empty keys of msgs as hashes of their
// bytes (64-bit FNV-1a), sorted: the rows of the key-lock table to take, in
// the order every writer takes them.
func keyHashes(msgs []outbox.Message) []int64 {
	var out []int64
	for i := range msgs {
		if msgs[i].Key == "" {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(msgs[i].Key))
		out = append(out, int64(h.Sum64()))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyLockSQL builds the statement that takes n key locks: an upsert of n
// rows of the key-lock table, which locks each row until the transaction
// ends.
func keyLockSQL(keysTable string, n int) string {
	var b strings.Builder
	b.Grow(100 + n*6)
	b.WriteString("INSERT INTO ")
	b.WriteString(keysTable)
	b.WriteString(" (key_hash, n) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,1)")
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE n = n + 1")
	return b.String()
}

// InsertTx implements outbox.Driver, in the caller's transaction tx: one
// INSERT for up to maxInsertRows messages (and a few MiB of values), more
// in chunks.
//
// Keyed messages first take their keys' locks: one upsert into the
// key-lock table (Migrate creates it) of a row per distinct key, in the
// order of the keys' hashes. The row locks last until tx ends, so a second
// transaction enqueueing for one of these keys waits in its own Enqueue
// until tx commits or rolls back, and only then takes its seq: a key's rows
// get their seqs in commit order, the order relays publish them in.
// (AUTO_INCREMENT hands seqs out at insert, and two writers can commit in
// the other order; a relay would then publish the later commit first, or
// skip past a row it cannot see yet.) MySQL has no transaction-scoped
// advisory locks, and GET_LOCK's are the session's, hence a table.
//
// So writers of one key serialize from Enqueue to commit: keep such
// transactions short after Enqueue. One Enqueue takes all its keys in one
// order, so two Enqueues cannot deadlock each other; a transaction that
// enqueues for several keys in several calls, or that locks other rows
// after Enqueue, can deadlock with one doing so in another order, and
// InnoDB then rolls one back (error 1213), as with any two transactions
// locking rows in different orders. Enqueueing all of a transaction's keyed
// messages in one call avoids it.
func (d *DB) InsertTx(ctx context.Context, tx *sql.Tx, msgs []outbox.Message) error {
	if tx == nil {
		return outbox.ErrNoTransaction
	}
	args, sizes, err := insertArgs(msgs)
	if err != nil {
		return err
	}
	hashes := keyHashes(msgs)
	err = chunks(len(hashes), maxStatementRows, func(int) int { return 20 }, func(lo, hi int) error {
		q := d.lock1
		if hi-lo != 1 {
			q = keyLockSQL(d.keysTable, hi-lo)
		}
		hargs := make([]any, hi-lo)
		for i, h := range hashes[lo:hi] {
			hargs[i] = h
		}
		if _, err := tx.ExecContext(ctx, q, hargs...); err != nil {
			return insertError(err)
		}
		return nil
	})
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
	}
	return wrap("enqueue", err)
}
