package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/pgcdc"
)

// slotReport is what status says of the database's logical replication
// slots (the CDC relay's, and any other's: each pins WAL).
type slotReport struct {
	slots []pgcdc.SlotStatus
	err   error // why they could not be read; nil when read
}

// readSlots reads the logical replication slots of the database at
// dbURL, a PostgreSQL one; any other database has none (nil report).
func readSlots(ctx context.Context, dbURL string) *slotReport {
	if !strings.HasPrefix(dbURL, "postgres://") && !strings.HasPrefix(dbURL, "postgresql://") {
		return nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return &slotReport{err: errors.New(redact.Text(err.Error()))}
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT slot_name FROM pg_replication_slots
		WHERE slot_type = 'logical' AND database = current_database() ORDER BY slot_name`)
	if err != nil {
		return &slotReport{err: err}
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return &slotReport{err: err}
	}
	rep := &slotReport{}
	for _, n := range names {
		st, err := pgcdc.SlotStatusOf(ctx, conn, n)
		if err != nil && !errors.Is(err, pgcdc.ErrSlotLost) {
			continue // dropped since the list was read
		}
		rep.slots = append(rep.slots, st)
	}
	return rep
}

// writeSlotsTable prints the slots after status's tables; nothing when
// the database has none.
func writeSlotsTable(out io.Writer, rep *slotReport) error {
	switch {
	case rep == nil || (rep.err == nil && len(rep.slots) == 0):
		return nil
	case rep.err != nil:
		_, err := fmt.Fprintf(out, "\nreplication slots: cannot read them: %s\n", oneLine(rep.err.Error()))
		return err
	}
	fmt.Fprintf(out, "\nREPLICATION SLOTS (%d): the WAL each keeps on the database's disk, and how far its reader (the CDC relay) is behind\n", len(rep.slots))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SLOT\tACTIVE\tWAL STATUS\tRETAINED WAL\tLAG\tSAFE WAL LEFT")
	for _, s := range rep.slots {
		active, safe := "no", "unlimited"
		if s.Active {
			active = "yes"
		}
		if s.SafeWALSize >= 0 {
			safe = bytesText(s.SafeWALSize)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", display(s.Slot), active, display(s.WALStatus), bytesText(s.Retained), bytesText(s.Lag), safe)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, s := range rep.slots {
		if s.WALStatus == "lost" {
			if _, err := fmt.Fprintf(out, "slot %s is lost: the server removed WAL it still needed (max_slot_wal_keep_size); drop and recreate it, then drain the pending rows with the polling relay (see docs/cdc.md)\n", display(s.Slot)); err != nil {
				return err
			}
		}
	}
	return nil
}

// slotJSON is one slot in status --json.
type slotJSON struct {
	Slot          string `json:"slot"`
	Plugin        string `json:"plugin"`
	Active        bool   `json:"active"`
	WALStatus     string `json:"wal_status"`
	ConfirmedLSN  string `json:"confirmed_lsn"`
	CurrentLSN    string `json:"current_lsn"`
	LagBytes      int64  `json:"lag_bytes"`
	RetainedBytes int64  `json:"retained_wal_bytes"`
	SafeWALBytes  int64  `json:"safe_wal_bytes"` // -1: unlimited
}

// slotsJSON adds the slots to status --json's object, when there are any.
func slotsJSON(obj map[string]any, rep *slotReport) {
	switch {
	case rep == nil || (rep.err == nil && len(rep.slots) == 0):
		return
	case rep.err != nil:
		obj["replication_slots_error"] = rep.err.Error()
		return
	}
	out := make([]slotJSON, 0, len(rep.slots))
	for _, s := range rep.slots {
		out = append(out, slotJSON{Slot: s.Slot, Plugin: s.Plugin, Active: s.Active, WALStatus: s.WALStatus,
			ConfirmedLSN: s.ConfirmedLSN, CurrentLSN: s.CurrentLSN, LagBytes: s.Lag, RetainedBytes: s.Retained, SafeWALBytes: s.SafeWALSize})
	}
	obj["replication_slots"] = out
}

// bytesText is n bytes for people: 0 B, 512 B, 1.5 KiB, 16.0 MiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, u = v/unit, next
	}
	return fmt.Sprintf("%.1f %s", v, u)
}
