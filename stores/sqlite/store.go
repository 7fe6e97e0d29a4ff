package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// Store is the relay side of a SQLite outbox, over a database/sql handle. It
// implements stores.Store and stores.Listener.
type Store struct {
	db     *sql.DB
	cfg    Config
	q      queries
	cursor keyCursor // see Claim
}

var (
	_ stores.Store    = (*Store)(nil)
	_ stores.Listener = (*Store)(nil)
)

// New returns the store for the table cfg names (nil: outbox_messages) in
// db. db stays the caller's to close; open it with Open, or with the
// settings Open documents.
func New(db *sql.DB, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{db: db, cfg: c, q: newQueries(c.table(), c.Table)}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// Migrate implements stores.Store.
func (s *Store) Migrate(ctx context.Context) error { return migrate(ctx, s.db, s.cfg) }

// CheckSchema returns ErrSchemaMissing (wrapped) unless the table exists.
func (s *Store) CheckSchema(ctx context.Context) error {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, s.cfg.Table).Scan(&n)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("%w: table %s not found", outbox.ErrSchemaMissing, s.cfg.Table)
	}
	return nil
}

// queries are the store's statements, built once over the quoted table name.
type queries struct {
	due, claim                                  string
	dueOrdered, claimKeys, claimKeysBounded     string
	claimUnkeyed                                string
	markPublished, deletePublished, retry, dead string
	release                                     string
	stats, deadList, replay, deadLetter, purge  string
	inserted                                    string
}

// recordCols are what scanRecords reads, in its order.
const recordCols = `seq, id, topic, key, type, payload, headers, created_at, available_at, attempts, coalesce(last_error, '')`

// Ids travel as one JSON parameter (see idsJSON), so no statement depends
// on how many there are or runs into SQLite's parameter limit.
const (
	inIDs      = `id IN (SELECT unhex(value) FROM json_each(?1))`
	failureSet = `(SELECT unhex(value ->> '$.id') AS id, value ->> '$.err' AS err, value ->> '$.next' AS next FROM json_each(?1)) AS f`
)

// claimable is the condition of a row a claim may take: pending, due at
// ?N and not leased (or its lease lapsed at ?N).
func claimable(n string) string {
	return `m.status = 0 AND m.available_at <= ?` + n + ` AND m.locked_until <= ?` + n
}

// The ordered claim serves keyed rows key by key, like PostgreSQL's store:
// it walks the distinct keys of pending rows in key order along the
// (key, seq) index of pending keyed rows, from a cursor, and takes each
// key's head (its lowest-seq pending row, due or not, leased or not) when
// that head is due and its lease is free. A head that is leased (in flight)
// or not yet due (a retry's backoff, a NotBefore) is not taken, and no later
// row of its key is ever a candidate: the key waits as a whole. The walk
// stops as soon as it has found enough claimable heads, so a claim costs a
// few index probes per key visited, not a scan of the backlog: a key with a
// deep backlog costs no more than one with a single row.
//
// Each probe's WHERE repeats the partial index's (status = 0 AND key <> ''),
// which is what lets SQLite use a partial index.

// headOf is the seq of key k's head, or NULL.
func headOf(t, k string) string {
	return `(SELECT h.seq FROM ` + t + ` AS h WHERE h.status = 0 AND h.key <> '' AND h.key = ` + k + `
		ORDER BY h.seq LIMIT 1)`
}

// nextKey is the first pending key after k (and at most ?6 when bounded),
// or NULL.
func nextKey(t, k string, bounded bool) string {
	upper := ""
	if bounded {
		upper = ` AND h.key <= ?6`
	}
	return `(SELECT h.key FROM ` + t + ` AS h WHERE h.status = 0 AND h.key <> '' AND h.key > ` + k + upper + `
		ORDER BY h.key LIMIT 1)`
}

// headClaimable is 1 when key k's head is due at ?3 and not leased, else 0.
func headClaimable(t, k string) string {
	return `EXISTS (SELECT 1 FROM ` + t + ` AS m WHERE m.seq = ` + headOf(t, k) + ` AND ` + claimable("3") + `)`
}

// walkSQL is the key walk: keys after ?5 (and up to ?6 when bounded), each
// row a key and n, the claimable heads among the keys before it; it stops
// once ?4 heads are found or the keys run out.
func walkSQL(t string, bounded bool) string {
	return `WITH RECURSIVE walk(key, n) AS (
		SELECT k, 0 FROM (SELECT ` + nextKey(t, "?5", bounded) + ` AS k) WHERE k IS NOT NULL
		UNION ALL
		SELECT ` + nextKey(t, "w.key", bounded) + `, w.n + ` + headClaimable(t, "w.key") + `
		FROM walk AS w
		WHERE w.n + ` + headClaimable(t, "w.key") + ` < ?4 AND ` + nextKey(t, "w.key", bounded) + ` IS NOT NULL
	)`
}

// keyedClaimSQL stamps the claimable heads the walk found. The UPDATE's own
// WHERE checks them again, in the same write transaction as the walk.
func keyedClaimSQL(t string, bounded bool) string {
	return walkSQL(t, bounded) + `
	UPDATE ` + t + ` AS m SET claim_token = ?1, locked_until = ?2
	WHERE m.seq IN (SELECT ` + headOf(t, "w.key") + ` FROM walk AS w) AND ` + claimable("3") + `
	RETURNING ` + recordCols
}

func newQueries(t, name string) queries {
	unkeyed := t + ` AS m INDEXED BY "` + name + `_pending_unkeyed"`
	return queries{
		due: `SELECT 1 FROM ` + t + ` AS m WHERE ` + claimable("1") + ` LIMIT 1`,
		claim: `UPDATE ` + t + ` SET claim_token = ?1, locked_until = ?2 WHERE seq IN (
			SELECT seq FROM ` + t + ` AS m WHERE ` + claimable("3") + `
			ORDER BY available_at, seq LIMIT ?4) RETURNING ` + recordCols,
		// Any unkeyed row due, or any key's head claimable (a walk of all
		// keys that stops at the first).
		dueOrdered: `SELECT 1 FROM ` + unkeyed + ` WHERE m.status = 0 AND m.key = '' AND ` + claimable("3") + `
			UNION ALL SELECT * FROM (` + walkSQL(t, false) + ` SELECT 1 FROM walk AS w WHERE ` +
			headClaimable(t, "w.key") + ` LIMIT 1) LIMIT 1`,
		claimKeys:        keyedClaimSQL(t, false),
		claimKeysBounded: keyedClaimSQL(t, true),
		claimUnkeyed: `UPDATE ` + t + ` SET claim_token = ?1, locked_until = ?2 WHERE seq IN (
			SELECT seq FROM ` + unkeyed + ` WHERE m.status = 0 AND m.key = '' AND ` + claimable("3") + `
			ORDER BY available_at, seq LIMIT ?4) RETURNING ` + recordCols,
		markPublished: `UPDATE ` + t + ` SET status = 1, published_at = ?3, claim_token = NULL, locked_until = 0
			WHERE ` + inIDs + ` AND claim_token = ?2`,
		deletePublished: `DELETE FROM ` + t + ` WHERE ` + inIDs + ` AND claim_token = ?2`,
		retry: `UPDATE ` + t + ` AS t SET attempts = t.attempts + 1, last_error = f.err, available_at = f.next,
			claim_token = NULL, locked_until = 0
			FROM ` + failureSet + ` WHERE t.id = f.id AND t.claim_token = ?2`,
		dead: `UPDATE ` + t + ` AS t SET status = 2, attempts = t.attempts + 1, last_error = f.err,
			claim_token = NULL, locked_until = 0
			FROM ` + failureSet + ` WHERE t.id = f.id AND t.claim_token = ?2`,
		release: `UPDATE ` + t + ` SET claim_token = NULL, locked_until = 0 WHERE ` + inIDs + ` AND claim_token = ?2`,
		stats: `SELECT topic,
			count(*) FILTER (WHERE status = 0),
			min(created_at) FILTER (WHERE status = 0),
			count(*) FILTER (WHERE status = 2),
			count(*) FILTER (WHERE status = 1)
			FROM ` + t + ` GROUP BY topic ORDER BY topic`,
		deadList: `SELECT ` + recordCols + ` FROM ` + t + `
			WHERE status = 2 AND (?1 = '' OR topic = ?1) ORDER BY created_at, seq LIMIT ?2`,
		replay: `UPDATE ` + t + ` SET status = 0, attempts = 0, available_at = ?2, claim_token = NULL, locked_until = 0
			WHERE status = 2 AND (json_array_length(?1) = 0 OR ` + inIDs + `) AND (?3 = '' OR topic = ?3)`,
		deadLetter: `UPDATE ` + t + ` SET status = 2, last_error = ?2, claim_token = NULL, locked_until = 0
			WHERE status = 0 AND ` + inIDs,
		inserted: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?1), 0)`,
		purge: `DELETE FROM ` + t + ` WHERE seq IN (
			SELECT seq FROM ` + t + ` WHERE status = 1 AND published_at < ?1 ORDER BY published_at LIMIT ?2)`,
	}
}

// scanned is a record with the columns that order a claim.
type scanned struct {
	rec       stores.Record
	seq       int64
	available int64
}

// scanRecords reads recordCols rows and closes rows.
func scanRecords(rows *sql.Rows) ([]scanned, error) {
	defer rows.Close()
	var out []scanned
	for rows.Next() {
		var (
			r                scanned
			id               []byte
			headers          sql.NullString
			created, attempt int64
		)
		err := rows.Scan(&r.seq, &id, &r.rec.Topic, &r.rec.Key, &r.rec.Type, &r.rec.Payload, &headers,
			&created, &r.available, &attempt, &r.rec.LastError)
		if err != nil {
			return nil, err
		}
		if r.rec.ID, err = uuid.FromBytes(id); err != nil {
			return nil, fmt.Errorf("row %d: id: %w", r.seq, err)
		}
		if headers.Valid {
			if err := json.Unmarshal([]byte(headers.String), &r.rec.Headers); err != nil {
				return nil, fmt.Errorf("row %d: headers: %w", r.seq, err)
			}
		}
		r.rec.Attempts = int(attempt)
		r.rec.CreatedAt = micros(created)
		if r.available > created && attempt == 0 {
			r.rec.NotBefore = micros(r.available)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// micros is the UTC time of a stored timestamp.
func micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// Stats implements stores.Store.
func (s *Store) Stats(ctx context.Context, _ stores.StatsParams) ([]stores.TopicStats, error) {
	rows, err := s.db.QueryContext(ctx, s.q.stats)
	if err != nil {
		return nil, wrap("stats", err)
	}
	defer rows.Close()
	var out []stores.TopicStats
	for rows.Next() {
		var ts stores.TopicStats
		var oldest sql.NullInt64
		if err := rows.Scan(&ts.Topic, &ts.Pending, &oldest, &ts.Dead, &ts.Published); err != nil {
			return nil, wrap("stats", err)
		}
		if oldest.Valid {
			ts.OldestPending = micros(oldest.Int64)
		}
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("stats", err)
	}
	return out, nil
}

// Dead implements stores.Store.
func (s *Store) Dead(ctx context.Context, p stores.DeadParams) ([]stores.Record, error) {
	if p.Limit <= 0 {
		p.Limit = 100
	}
	rows, err := s.db.QueryContext(ctx, s.q.deadList, p.Topic, p.Limit)
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

// Replay implements stores.Store.
func (s *Store) Replay(ctx context.Context, p stores.ReplayParams) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q.replay, idsJSON(p.IDs), p.Now.UnixMicro(), p.Topic)
	if err != nil {
		return 0, wrap("replay", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap("replay", err)
	}
	return n, nil
}

// DeadLetter implements stores.Store, in one statement. A record a relay
// holds right now is made dead all the same, and its lease cleared: the
// relay's Complete then finds the record no longer carries its token and
// leaves it dead.
func (s *Store) DeadLetter(ctx context.Context, p stores.DeadLetterParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, s.q.deadLetter, idsJSON(p.IDs), p.Reason)
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap("dead-letter", err)
	}
	return n, nil
}

// Purge implements stores.Store. SQLite has one writer: concurrent purges
// take turns, each a short statement of at most p.Limit rows.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (int64, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	res, err := s.db.ExecContext(ctx, s.q.purge, p.Before.UnixMicro(), p.Limit)
	if err != nil {
		return 0, wrap("purge", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}

// Blocked implements stores.Store. SCAFFOLD: replaced by the stats work.
func (s *Store) Blocked(ctx context.Context, p stores.BlockedParams) ([]stores.BlockedKey, error) {
	return nil, errors.New("SCAFFOLD: Blocked not implemented")
}
