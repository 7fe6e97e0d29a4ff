package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// Store is the relay's side of the outbox table: (*DB).Store returns it. It
// implements stores.Store and stores.Listener.
type Store struct {
	d      *DB
	db     *sql.DB
	cfg    Config
	q      queries
	cursor sqlkit.KeyCursor // see Claim
}

var (
	_ stores.Store    = (*Store)(nil)
	_ stores.Listener = (*Store)(nil)
)

// Config returns the configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// table is the quoted outbox table name, for SQL.
func (s *Store) table() string { return quote(s.cfg.Table) }

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// Migrate implements stores.Store: it brings the outbox table to its latest
// schema version, applying the numbered migrations the version table does
// not record yet, in order, in one IMMEDIATE transaction, so that relays
// starting together take turns and the later ones find nothing to do. A
// table created before versions were recorded is version 1. An outbox
// table already at the latest version costs a few reads and no write lock.
// (*DB).Migrate does the same for both tables.
func (s *Store) Migrate(ctx context.Context) error { return s.d.migrate(ctx, s.d.outboxSchema) }

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
	claimUnkeyed, claimRuns                     string
	markPublished, deletePublished, retry, dead string
	release                                     string
	purge, purgeDead                            string
	inserted                                    string
}

// recordCols are what scanRecords reads, in its order.
const recordCols = `seq, id, topic, key, type, payload, headers, created_at, available_at, attempts, coalesce(last_error, '')`

// Ids travel as one JSON parameter (see sqlkit.IDsJSON), so no statement depends
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
// deep backlog costs no more than one with a single row. With
// ClaimParams.PerKey, runsSQL then takes the run after each head it took.
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

// runsSQL stamps the runs after heads the claim has just stamped: for each
// head (the seqs of the JSON array ?5, in its order), the pending rows of
// its key right after it, in seq order, up to ?6 of them, as long as each
// is due at ?3 and not leased (a relay in unordered mode may hold one): the
// run ends before the first that is not. Of all the runs together it takes
// ?4 rows at most, the first keys' first (the last run taken may be cut
// short: still a run). Each head costs two ranges of the (key, seq) index,
// each at most ?6 rows long (last: the ?6-th row after the head; stop: the
// first row up to it that is not claimable), however deep its key's
// backlog, and one more for the rows taken. The CTEs are MATERIALIZED so
// that last and stop are computed once per head: inlined, SQLite would
// compute them again for each row of the join.
//
// Why a run never holds a row out of turn (see claimOrdered for the rest):
// it runs in the write transaction that stamped its head, so the head is
// still its key's lowest pending seq and this batch's, and the rows after
// it are read as they are: every row of the key between the head and a row
// taken is pending, claimable and taken too, by this statement. The UPDATE's
// own WHERE checks them again; taken, which depends on no row of the
// UPDATE, is computed once, before the UPDATE changes a row, so the check
// reads the rows as taken did and always agrees: it never leaves a gap.
func runsSQL(t string) string {
	return `WITH heads(ord, key, head) AS MATERIALIZED (
		SELECT j.key, (SELECT x.key FROM ` + t + ` AS x WHERE x.seq = j.value), j.value FROM json_each(?5) AS j
	), ends(ord, key, head, last) AS MATERIALIZED (
		SELECT e.ord, e.key, e.head, coalesce((SELECT h.seq FROM ` + t + ` AS h
			WHERE h.status = 0 AND h.key <> '' AND h.key = e.key AND h.seq > e.head
			ORDER BY h.seq LIMIT 1 OFFSET ?6 - 1), ` + maxSeq + `)
		FROM heads AS e
	), runs(ord, key, head, last, stop) AS MATERIALIZED (
		SELECT r.ord, r.key, r.head, r.last, coalesce((SELECT m.seq FROM ` + t + ` AS m
			WHERE m.status = 0 AND m.key <> '' AND m.key = r.key AND m.seq > r.head AND m.seq <= r.last
			AND NOT (` + claimable("3") + `) ORDER BY m.seq LIMIT 1), ` + maxSeq + `)
		FROM ends AS r
	), taken(seq) AS (
		SELECT c.seq FROM (SELECT h.seq, row_number() OVER (ORDER BY r.ord, h.seq) AS n
			FROM runs AS r JOIN ` + t + ` AS h ON h.status = 0 AND h.key <> '' AND h.key = r.key
				AND h.seq > r.head AND h.seq <= r.last AND h.seq < r.stop) AS c
		WHERE c.n <= ?4
	)
	UPDATE ` + t + ` AS m SET claim_token = ?1, locked_until = ?2
	WHERE m.seq IN (SELECT seq FROM taken) AND ` + claimable("3") + `
	RETURNING ` + recordCols
}

// maxSeq is above every seq (SQLite's largest integer).
const maxSeq = `9223372036854775807`

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
		claimRuns:        runsSQL(t),
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
		release:  `UPDATE ` + t + ` SET claim_token = NULL, locked_until = 0 WHERE ` + inIDs + ` AND claim_token = ?2`,
		inserted: `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?1), 0)`,
		purge: `DELETE FROM ` + t + ` WHERE seq IN (
			SELECT seq FROM ` + t + ` WHERE status = 1 AND published_at < ?1 ORDER BY published_at LIMIT ?2)`,
		purgeDead: `DELETE FROM ` + t + ` WHERE seq IN (
			SELECT seq FROM ` + t + ` WHERE status = 2 AND created_at < ?1 ORDER BY created_at, id LIMIT ?2)`,
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
			if err := headerjson.Unmarshal([]byte(headers.String), &r.rec.Headers); err != nil {
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

// Purge implements stores.Store. SQLite has one writer: concurrent purges
// take turns, each a short transaction of at most p.Limit rows of each
// kind.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (int64, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var n int64
	err := immediate(ctx, s.db, wait{until: time.Now().Add(maxLockWait), gate: s.d.gate}, func(ctx context.Context, tx *wtx) error {
		n = 0
		for _, k := range []struct {
			bound time.Time
			q     string
		}{{p.Before, s.q.purge}, {p.DeadBefore, s.q.purgeDead}} {
			if k.bound.IsZero() {
				continue
			}
			res, err := tx.exec(ctx, k.q, k.bound.UnixMicro(), p.Limit)
			if err != nil {
				return err
			}
			d, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += d
		}
		return nil
	})
	if err != nil {
		return 0, wrap("purge", err)
	}
	return n, nil
}
