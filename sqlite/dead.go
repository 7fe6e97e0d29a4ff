package sqlite

import (
	"context"
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// deadWhere is the WHERE clause of Dead and DeadCount for p's filters,
// and its arguments.
func deadWhere(p stores.DeadParams) (string, []any) {
	w := ` WHERE status = 2`
	var args []any
	if len(p.IDs) > 0 {
		w += ` AND id IN (SELECT unhex(value) FROM json_each(?))`
		args = append(args, sqlkit.IDsJSON(p.IDs))
	}
	if p.Topic != "" {
		w += ` AND topic = ?`
		args = append(args, p.Topic)
	}
	if p.Key != "" {
		w += ` AND key = ?`
		args = append(args, p.Key)
	}
	if !p.CreatedBefore.IsZero() {
		w += ` AND created_at < ?`
		args = append(args, p.CreatedBefore.UnixMicro())
	}
	return w, args
}

// Dead implements stores.Store. Without p.IDs it reads the index of dead
// rows in list order ((created_at, id), or (topic, created_at) for one
// topic); with them, the rows by id.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	w, args := deadWhere(p)
	if p.After != nil {
		w += ` AND (created_at, id) > (?, ?)`
		args = append(args, p.After.CreatedAt.UnixMicro(), p.After.ID[:])
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+recordCols+` FROM `+s.table()+w+
		` ORDER BY created_at, id LIMIT ?`, append(args, p.Limit)...)
	if err != nil {
		return nil, wrap("dead", err)
	}
	recs, err := scanRecords(rows)
	if err != nil {
		return nil, wrap("dead", err)
	}
	out := make([]stores.Record, len(recs))
	for i, r := range recs {
		out[i] = r.rec
	}
	return out, nil
}

// DeadCount implements stores.Store, over the same indexes as Dead.
func (s *Store) DeadCount(ctx context.Context, p stores.DeadParams) (int64, error) {
	w, args := deadWhere(p)
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+s.table()+w, args...).Scan(&n); err != nil {
		return 0, wrap("dead count", err)
	}
	return n, nil
}

// replaySQL makes dead rows of table t pending again, due at ?2: those
// named in ?1 (every one when it names none), of topic ?3 (any when empty).
func replaySQL(t string) string {
	return `UPDATE ` + t + ` SET status = 0, attempts = 0, available_at = ?2, claim_token = NULL, locked_until = 0
		WHERE status = 2 AND (json_array_length(?1) = 0 OR ` + inIDs + `) AND (?3 = '' OR topic = ?3)`
}

// Replay implements stores.Store.
func (s *Store) Replay(ctx context.Context, p stores.ReplayParams) (int64, error) {
	n, err := s.write(ctx, replaySQL(s.table()), sqlkit.IDsJSON(p.IDs), p.Now.UnixMicro(), p.Topic)
	if err != nil {
		return 0, wrap("replay", err)
	}
	return n, nil
}

// deadLetterSQL makes the pending rows of table t named in ?1 dead, their
// last error kept beside the reason ?2 (see stores.Store.DeadLetter).
func deadLetterSQL(t string) string {
	return `UPDATE ` + t + ` SET status = 2, claim_token = NULL, locked_until = 0, last_error = CASE
			WHEN ?2 = '' THEN last_error
			WHEN coalesce(last_error, '') = '' THEN ?2
			ELSE ?2 || '; last error: ' || last_error END
		WHERE status = 0 AND ` + inIDs
}

// DeadLetter implements stores.Store, in one statement. A record a relay
// holds right now is made dead all the same, and its lease cleared: the
// relay's Complete then finds the record no longer carries its token and
// leaves it dead.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	n, err := s.write(ctx, deadLetterSQL(s.table()), sqlkit.IDsJSON(p.IDs), p.Reason)
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	return n, nil
}

// write runs one statement in a write transaction that queues for the lock
// like the relay's (see immediate), so a replay or dead-letter under writer
// load waits its turn instead of failing with SQLITE_BUSY. It returns the
// rows affected.
func (s *Store) write(ctx context.Context, q string, args ...any) (n int64, err error) {
	err = immediate(ctx, s.db, wait{until: time.Now().Add(maxLockWait), gate: s.d.gate}, func(ctx context.Context, tx *wtx) error {
		res, err := tx.exec(ctx, q, args...)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	return n, err
}

// Discard implements stores.Store, in one statement, the rows found by id.
func (s *Store) Discard(ctx context.Context, p stores.DiscardParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	n, err := s.write(ctx, `DELETE FROM `+s.table()+` WHERE status = 2 AND `+inIDs, sqlkit.IDsJSON(p.IDs))
	if err != nil {
		return 0, wrap("discard", err)
	}
	return n, nil
}
