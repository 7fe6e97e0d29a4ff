package sqlite

import (
	"context"
	"time"

	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// deadSQL lists dead rows of table t, of topic ?1 (any when empty), at
// most ?2, and with ids, only those named in ?3 (see sqlkit.IDsJSON).
func deadSQL(t string, ids bool) string {
	named := ""
	if ids {
		named = ` AND id IN (SELECT unhex(value) FROM json_each(?3))`
	}
	return `SELECT ` + recordCols + ` FROM ` + t + `
		WHERE status = 2 AND (?1 = '' OR topic = ?1)` + named + ` ORDER BY created_at, seq LIMIT ?2`
}

// Dead implements stores.Store. Without p.IDs it reads the index of dead
// rows; with them, the rows by id.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	args := []any{p.Topic, p.Limit}
	if len(p.IDs) > 0 {
		args = append(args, sqlkit.IDsJSON(p.IDs))
	}
	rows, err := s.db.QueryContext(ctx, deadSQL(s.table(), len(p.IDs) > 0), args...)
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
