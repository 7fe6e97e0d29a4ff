package outbox

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
)

// Driver writes messages inside the caller's transaction. Each database
// package's object is one, for the transaction type it accepts: postgres.New
// for pgx.Tx, postgres.NewSQL, mysql.New and sqlite.New for *sql.Tx.
type Driver[TTx any] interface {
	// InsertTx inserts msgs, already validated and with ID and CreatedAt
	// set, in one round trip inside tx. It must not commit, and it must fail
	// with ErrNoTransaction when tx is nil or done.
	InsertTx(ctx context.Context, tx TTx, msgs []Message) error
}

// Config configures an Outbox. The zero value is ready to use.
type Config struct {
	// Clock stamps CreatedAt. Default: SystemClock.
	Clock Clock
	// MaxPayload rejects payloads larger than this many bytes at enqueue,
	// in the caller's transaction, instead of at the broker later. Default:
	// 1 MiB (NATS's default max_payload). Negative: no limit.
	MaxPayload int
	// Logger receives a Debug line for each Enqueue, with the IDs it
	// wrote in the caller's transaction (published once it commits).
	// Default: discarded.
	Logger *slog.Logger
}

// DefaultMaxPayload is Config.MaxPayload's default.
const DefaultMaxPayload = 1 << 20

func (c *Config) withDefaults() Config {
	var out Config
	if c != nil {
		out = *c
	}
	if out.Clock == nil {
		out.Clock = SystemClock{}
	}
	if out.MaxPayload == 0 {
		out.MaxPayload = DefaultMaxPayload
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	return out
}

// Outbox enqueues messages in the caller's transaction. TTx is the
// transaction type of the driver: *sql.Tx or pgx.Tx. It is safe for
// concurrent use.
type Outbox[TTx any] struct {
	driver Driver[TTx]
	cfg    Config
}

// New returns an Outbox that writes through driver. cfg may be nil.
func New[TTx any](driver Driver[TTx], cfg *Config) *Outbox[TTx] {
	return &Outbox[TTx]{driver: driver, cfg: cfg.withDefaults()}
}

// Enqueue records msgs in tx, in one round trip. They are published after tx
// commits, and never if it rolls back. Zero IDs and CreatedAt are filled in;
// the caller's slice is not modified.
func (o *Outbox[TTx]) Enqueue(ctx context.Context, tx TTx, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := o.cfg.Clock.Now().UTC()
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if err := m.validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		if o.cfg.MaxPayload > 0 && len(m.Payload) > o.cfg.MaxPayload {
			return fmt.Errorf("message %d: %w: payload is %d bytes, limit %d", i, ErrInvalidMessage, len(m.Payload), o.cfg.MaxPayload)
		}
		if m.ID == uuid.Nil {
			m.ID = NewID()
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		out[i] = m
	}
	if err := o.driver.InsertTx(ctx, tx, out); err != nil {
		return err
	}
	if o.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		ids := make([]string, len(out))
		for i, m := range out {
			ids[i] = m.ID.String()
		}
		o.cfg.Logger.DebugContext(ctx, "outbox: enqueued", "ids", ids)
	}
	return nil
}
