package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// Driver is an inbox table in a database, for one transaction type.
// A database package's object gives it: postgres.New(pool).Inbox() for
// pgx.Tx, postgres.NewSQL, mysql.New and sqlite.New for *sql.Tx.
type Driver[TTx any] interface {
	// RunTx runs fn in a new transaction. It commits when fn returns nil
	// and rolls back otherwise (a panic included), returning fn's error
	// unchanged, or the commit's.
	RunTx(ctx context.Context, fn func(tx TTx) error) error
	// RecordTx inserts r in tx unless a record with r.ID exists, and
	// reports whether it inserted. When another transaction has inserted
	// r.ID and not yet ended, RecordTx waits for it: it must never report
	// "inserted" for an ID that a concurrent transaction then commits.
	RecordTx(ctx context.Context, tx TTx, r Record) (inserted bool, err error)
	// Purge deletes up to limit records received before before, oldest
	// first, and returns how many it deleted. Concurrent purges do not
	// block each other.
	Purge(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Config configures an Inbox. The zero value is ready to use: zero means
// the default, for every field.
type Config struct {
	// Clock stamps each record's ReceivedAt and dates PurgeExpired's
	// cut-off. Default outbox.SystemClock.
	Clock outbox.Clock
	// Retention is how long a record is kept: PurgeExpired deletes older
	// ones. A duplicate that arrives after its record was purged is not
	// caught. Default 7 days.
	Retention time.Duration
	// PurgeBatch is how many records one PurgeExpired statement deletes.
	// Default 1000.
	PurgeBatch int
	// Logger receives a Debug line for each duplicate dropped and an Info
	// line for each PurgeExpired that deleted records. Default: discarded.
	Logger *slog.Logger
}

// Defaults for Config.
const (
	DefaultRetention  = 7 * 24 * time.Hour
	DefaultPurgeBatch = 1000
)

// validate rejects what no default can stand for: negative numbers.
func (c *Config) validate() error {
	var errs []error
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("Retention %v: must not be negative", c.Retention))
	}
	if c.PurgeBatch < 0 {
		errs = append(errs, fmt.Errorf("PurgeBatch %d: must not be negative", c.PurgeBatch))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("inbox: config: %w", err)
	}
	return nil
}

func (c *Config) withDefaults() (Config, error) {
	var out Config
	if c != nil {
		out = *c
	}
	if err := out.validate(); err != nil {
		return out, err
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Retention == 0 {
		out.Retention = DefaultRetention
	}
	if out.PurgeBatch == 0 {
		out.PurgeBatch = DefaultPurgeBatch
	}
	return out, nil
}

// Inbox runs handlers exactly once per message ID. TTx is the driver's
// transaction type. It is safe for concurrent use.
type Inbox[TTx any] struct {
	driver Driver[TTx]
	cfg    Config
}

// New returns an Inbox over driver (a database package's DB.Inbox()). cfg
// may be nil; a negative field is an error.
func New[TTx any](driver Driver[TTx], cfg *Config) (*Inbox[TTx], error) {
	if driver == nil {
		return nil, errors.New("inbox: New needs a driver")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Inbox[TTx]{driver: driver, cfg: c}, nil
}

// errDuplicate rolls back the transaction of a duplicate.
var errDuplicate = errors.New("inbox: duplicate")

// Handle runs h for msg in a new transaction that first records msg.ID,
// and commits both. When msg.ID is recorded already, h does not run and
// the outcome is Duplicate. When h fails, nothing is recorded and its error
// is returned unchanged; so is a failure to commit, after which the effect
// may or may not have committed (a redelivery finds out: it runs h again,
// or is a Duplicate).
func (in *Inbox[TTx]) Handle(ctx context.Context, msg Message, h Handler[TTx]) (Outcome, error) {
	if msg.ID == uuid.Nil {
		return 0, fmt.Errorf("%w: no ID", ErrInvalidMessage)
	}
	err := in.driver.RunTx(ctx, func(tx TTx) error {
		inserted, err := in.RecordTx(ctx, tx, msg)
		if err != nil {
			return err
		}
		if !inserted {
			return errDuplicate
		}
		return h(ctx, tx, msg)
	})
	switch {
	case errors.Is(err, errDuplicate):
		in.cfg.Logger.Debug("inbox: duplicate dropped", "id", msg.ID, "topic", msg.Topic)
		return Duplicate, nil
	case err != nil:
		return 0, err
	}
	return Handled, nil
}

// RecordTx records msg in the caller's transaction and reports whether it
// is new: false means a transaction that committed handled it already, and
// the caller should skip the effect. It is Handle's first step, for callers
// that run their transactions themselves; record before applying the
// effect, so that a concurrent duplicate waits on the record.
func (in *Inbox[TTx]) RecordTx(ctx context.Context, tx TTx, msg Message) (bool, error) {
	if msg.ID == uuid.Nil {
		return false, fmt.Errorf("%w: no ID", ErrInvalidMessage)
	}
	return in.driver.RecordTx(ctx, tx, Record{ID: msg.ID, Topic: msg.Topic, ReceivedAt: in.cfg.Clock.Now().UTC()})
}

// Purge deletes up to limit records received before before (limit ≤ 0:
// Config.PurgeBatch) and returns how many it deleted. A duplicate of a
// purged message is no longer caught.
func (in *Inbox[TTx]) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		limit = in.cfg.PurgeBatch
	}
	return in.driver.Purge(ctx, before.UTC(), limit)
}

// PurgeExpired deletes every record older than Config.Retention, in
// statements of Config.PurgeBatch records, and returns how many it deleted.
// Run it periodically (one instance is enough, but several do not block
// each other).
func (in *Inbox[TTx]) PurgeExpired(ctx context.Context) (int64, error) {
	before := in.cfg.Clock.Now().Add(-in.cfg.Retention)
	var total int64
	for {
		n, err := in.Purge(ctx, before, in.cfg.PurgeBatch)
		total += n
		if err != nil || n < int64(in.cfg.PurgeBatch) {
			if total > 0 {
				in.cfg.Logger.Info("inbox: purged expired records", "deleted", total, "received_before", before.UTC())
			}
			return total, err
		}
	}
}
