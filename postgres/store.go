package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/headerjson"
	"github.com/outboxgo/outbox/internal/sqlkit"
	"github.com/outboxgo/outbox/stores"
)

// Store is the relay's store of the outbox table, over the pgx pool of its
// DB: it implements stores.Store, stores.QuietListener (LISTEN/NOTIFY) and
// stores.TxClaimer[pgx.Tx] (a claim is a transaction that in-process
// handlers join). Get it from DB.Store.
type Store struct {
	pool   *pgxpool.Pool
	cfg    Config
	nm     names
	mig    *migrator
	cursor sqlkit.KeyCursor
	// walking is held by an ordered claim while it reads keys from the
	// cursor, so that the next claim starts where it stopped (see claim).
	walking sync.Mutex
	// rankedUntil is when claims go back to locking runs in order after
	// one met a row another transaction held (see runLocking), in Unix
	// nanoseconds.
	rankedUntil atomic.Int64
}

var (
	_ stores.Store             = (*Store)(nil)
	_ stores.QuietListener     = (*Store)(nil)
	_ stores.TxClaimer[pgx.Tx] = (*Store)(nil)
)

// Config returns the configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// ClaimTimeout implements stores.Store: Config.ClaimTimeout.
func (s *Store) ClaimTimeout() time.Duration { return s.cfg.ClaimTimeout }

// ClaimsInTx implements stores.TxClaimer: a claim is a pgx.Tx that
// in-process handlers join (see relay.Handlers).
func (s *Store) ClaimsInTx(pgx.Tx) {}

// Migrate implements stores.Store: it brings the outbox table to the latest
// schema version (DB.Migrate does the inbox table too).
func (s *Store) Migrate(ctx context.Context) error {
	return s.mig.up(ctx, pgxBegin(s.pool), s.mig.outbox)
}

// CheckSchema returns ErrSchemaMissing (wrapped) unless the table exists.
func (s *Store) CheckSchema(ctx context.Context) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.nm.table).Scan(&ok)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: table %s.%s not found", outbox.ErrSchemaMissing, s.cfg.Schema, s.cfg.Table)
	}
	return nil
}

// wrap names the operation and turns a missing table into
// outbox.ErrSchemaMissing.
func wrap(op string, err error) error {
	return sqlkit.Wrap("postgres", op, err, isSchemaMissing)
}

// recordCols are the columns a stores.Record is read from (see
// rowScanner), in its order; recordBase is all but the error.
const (
	recordBase = `id, topic, key, type, payload, headers, created_at, available_at, attempts`
	recordCols = recordBase + `, coalesce(last_error, '')`
)

// uuidDst is where a row's uuid column is scanned into id: its bytes.
// Through a *uuid.UUID, a sql.Scanner, pgx formats the binary UUID as
// text for uuid.Scan to parse back, four allocations a row.
func uuidDst(id *uuid.UUID) *[16]byte { return (*[16]byte)(id) }

func scanRecord(r pgx.CollectableRow) (stores.Record, error) {
	var rec stores.Record
	var available time.Time
	err := r.Scan(uuidDst(&rec.ID), &rec.Topic, &rec.Key, &rec.Type, &rec.Payload, headerjson.Column(&rec.Headers),
		&rec.CreatedAt, &available, &rec.Attempts, &rec.LastError)
	setNotBefore(&rec, available)
	return rec, err
}

// setNotBefore sets rec's NotBefore from its available_at: a record never
// tried whose due time is after its creation was enqueued with one.
func setNotBefore(rec *stores.Record, available time.Time) {
	if available.After(rec.CreatedAt) && rec.Attempts == 0 {
		rec.NotBefore = available
	}
}

// Purge implements stores.Store: a statement per kind. Rows another purge
// has locked are skipped, so relays purging at once share the work instead
// of deadlocking.
func (s *Store) Purge(ctx context.Context, p stores.PurgeParams) (int64, error) {
	if p.Limit <= 0 {
		p.Limit = 1000
	}
	var n int64
	for _, k := range []struct {
		bound time.Time
		where string
	}{
		{p.Before, `status = 1 AND published_at < $1 ORDER BY published_at`},
		{p.DeadBefore, `status = 2 AND created_at < $1 ORDER BY created_at, id`},
	} {
		if k.bound.IsZero() {
			continue
		}
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.nm.table+` WHERE seq IN (
			SELECT seq FROM `+s.nm.table+` WHERE `+k.where+` LIMIT $2 FOR UPDATE SKIP LOCKED)`, k.bound.UTC(), p.Limit)
		if err != nil {
			return n, wrap("purge", err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}

// errClosedBatch is returned by Complete on a batch already ended.
var errClosedBatch = errors.New("postgres: batch already completed or aborted")
