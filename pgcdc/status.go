package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is what SlotStatusOf reads with: a *pgx.Conn, a *pgxpool.Pool or
// a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SlotStatus is a replication slot's state, from pg_replication_slots.
type SlotStatus struct {
	Slot   string
	Plugin string
	// Active: a session (a relay) streams from the slot now.
	Active bool
	// ConfirmedLSN is what the relay has confirmed published; CurrentLSN
	// the server's current WAL position.
	ConfirmedLSN, CurrentLSN string
	// Lag is CurrentLSN − ConfirmedLSN in bytes: how far the relay is
	// behind (a heartbeat keeps it small on an idle outbox).
	Lag int64
	// Retained is CurrentLSN − restart_lsn in bytes: the WAL the slot
	// keeps the server from removing.
	Retained int64
	// WALStatus is reserved, extended, unreserved or lost (see
	// max_slot_wal_keep_size).
	WALStatus string
	// SafeWALSize is how many more bytes of WAL may be written before the
	// slot is lost; -1 when max_slot_wal_keep_size is unlimited.
	SafeWALSize int64
}

// SlotStatusOf reads slot's status. An invalidated slot (wal_status lost)
// returns its status and an error wrapping ErrSlotLost; a missing one an
// error naming it.
func SlotStatusOf(ctx context.Context, q Querier, slot string) (SlotStatus, error) {
	s := SlotStatus{Slot: slot}
	err := q.QueryRow(ctx, `SELECT coalesce(plugin, ''), active, coalesce(confirmed_flush_lsn::text, ''), pg_current_wal_lsn()::text,
		coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
		coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint,
		coalesce(wal_status, ''), coalesce(safe_wal_size, -1)
		FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(
		&s.Plugin, &s.Active, &s.ConfirmedLSN, &s.CurrentLSN, &s.Lag, &s.Retained, &s.WALStatus, &s.SafeWALSize)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s, fmt.Errorf("pgcdc: no replication slot %q", slot)
	case err != nil:
		return s, fmt.Errorf("pgcdc: slot status: %w", err)
	case s.WALStatus == "lost":
		return s, fmt.Errorf("%w: slot %s: the server removed WAL it still needed (max_slot_wal_keep_size); "+
			"drop and recreate the slot, then drain the pending rows with the polling relay", ErrSlotLost, slot)
	}
	return s, nil
}

// Status reads the relay's slot status (see SlotStatusOf).
func (r *Relay) Status(ctx context.Context) (SlotStatus, error) {
	r.mu.Lock()
	pool := r.pool
	r.mu.Unlock()
	if pool != nil {
		return SlotStatusOf(ctx, pool, r.cfg.Slot)
	}
	conn, err := pgx.Connect(ctx, r.cfg.ConnString)
	if err != nil {
		return SlotStatus{Slot: r.cfg.Slot}, fmt.Errorf("pgcdc: slot status: %w", redactErr(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return SlotStatusOf(ctx, conn, r.cfg.Slot)
}

// Behind is how long ago the oldest transaction the relay has read and not
// yet finished (published and marked, every transaction before it too)
// committed, by Config.Clock: the relay's lag in time, 0 when it is caught
// up. A relay that is not streaming (a hot standby, or reconnecting) holds
// nothing and reports 0; its slot's Lag (Status) still says how far behind
// the slot is, in bytes.
func (r *Relay) Behind() time.Duration {
	e := r.eng
	e.mu.Lock()
	var oldest time.Time
	for _, t := range e.txns {
		if !t.commit.IsZero() {
			oldest = t.commit
			break
		}
	}
	e.mu.Unlock()
	if oldest.IsZero() {
		return 0
	}
	return max(0, r.cfg.Clock.Now().Sub(oldest))
}

// Paused reports whether the stream is paused because the broker was
// unavailable, or refused the relay's configuration (refused), at its last
// probe, and since when (by Config.Clock); paused is false while the
// broker answers.
func (r *Relay) Paused() (paused, refused bool, since time.Time) {
	e := r.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outages > 0, e.refused, e.pausedSince
}
