package outboxcli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

// blockedLimit is how many blocked keys status lists.
const blockedLimit = 100

func newStatus(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show pending (due, scheduled, retrying), dead and kept events per topic, and the keys a failing event blocks",
		Long: `status shows, per topic, the events not yet published — PENDING, split into
DUE (the relay may publish them now) and SCHEDULED (a NotBefore ahead, or a
retry's backoff) — and among them RETRYING (failed at least once); the age
of the oldest due event (the relay's lag: an event scheduled ahead is not
lag); DEAD events (see 'outbox dead'); and published events still kept
(--retention).

Then the BLOCKED KEYS: keys whose oldest pending event (the head) has
failed, with the head's ID, attempts, next attempt and last error. With
per-key order the relay publishes nothing else of such a key until the head
succeeds or is dead-lettered ('outbox dead-letter ID'). At most 100 are
listed, the oldest heads first.

On PostgreSQL, then the database's logical REPLICATION SLOTS (the CDC
relay's, 'outbox relay --mode cdc', and any other's): whether a reader
streams from each, its wal_status, the WAL it keeps on the database's disk
(RETAINED WAL), how far its reader is behind (LAG, bytes of WAL), and how
much more WAL may be written before max_slot_wal_keep_size invalidates it.
Nothing is shown when there are none.

Control characters in topics, keys and errors are shown escaped ("a\nb");
--json carries the exact strings.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			now := time.Now()
			st, err := d.store.Stats(ctx, stores.StatsParams{Now: now})
			if err != nil {
				return schemaMissing(err, d)
			}
			blocked, err := d.store.Blocked(ctx, stores.BlockedParams{Limit: blockedLimit + 1})
			if err != nil {
				return fmt.Errorf("blocked keys in %s: %w", d.where, schemaMissing(err, d))
			}
			more := len(blocked) > blockedLimit
			blocked = blocked[:min(len(blocked), blockedLimit)]
			slots := readSlots(ctx, g.databaseURL)
			if asJSON {
				return writeStatusJSON(g.stdout, st, blocked, more, slots, now)
			}
			if err := writeStatusTable(g.stdout, st, blocked, more, now); err != nil {
				return err
			}
			return writeSlotsTable(g.stdout, slots)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of tables (exact strings)")
	return cmd
}

// age is how long ago t was, rounded for people; "-" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// until is how far ahead t is, rounded for people; "now" when past.
func until(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case t.IsZero() || d <= 0:
		return "now"
	case d < time.Second:
		return "in " + d.Round(time.Millisecond).String()
	}
	return "in " + d.Round(time.Second).String()
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func writeStatusTable(out io.Writer, st []stores.TopicStats, blocked []stores.BlockedKey, more bool, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPENDING\tDUE\tSCHEDULED\tRETRYING\tOLDEST DUE\tDEAD\tPUBLISHED (KEPT)")
	var total stores.TopicStats
	for _, ts := range st {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", display(ts.Topic), ts.Pending, ts.Due, ts.Scheduled, ts.Retrying,
			age(ts.OldestDue, now), ts.Dead, ts.Published)
		total.Pending += ts.Pending
		total.Due += ts.Due
		total.Scheduled += ts.Scheduled
		total.Retrying += ts.Retrying
		total.Dead += ts.Dead
		total.Published += ts.Published
		total.OldestDue = earliest(total.OldestDue, ts.OldestDue)
	}
	fmt.Fprintf(w, "(all)\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", total.Pending, total.Due, total.Scheduled, total.Retrying,
		age(total.OldestDue, now), total.Dead, total.Published)
	if err := w.Flush(); err != nil {
		return err
	}
	if len(blocked) == 0 {
		_, err := fmt.Fprintln(out, "\nno blocked keys")
		return err
	}
	fmt.Fprintf(out, "\nBLOCKED KEYS (%d): a failing head holds back its key's later events; 'outbox dead-letter HEAD' lets them go\n", len(blocked))
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tKEY\tHEAD\tATTEMPTS\tNEXT ATTEMPT\tBEHIND\tLAST ERROR")
	for _, b := range blocked {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%d\t%s\n", display(b.Head.Topic), display(b.Head.Key), b.Head.ID,
			b.Head.Attempts, until(b.NextAttempt, now), b.Behind, display(b.Head.LastError))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if more {
		_, err := fmt.Fprintf(out, "… more blocked keys: the %d with the oldest heads are shown\n", len(blocked))
		return err
	}
	return nil
}

type topicJSON struct {
	Topic               string     `json:"topic"`
	Pending             int64      `json:"pending"`
	Due                 int64      `json:"due"`
	Scheduled           int64      `json:"scheduled"`
	Retrying            int64      `json:"retrying"`
	OldestPending       *time.Time `json:"oldest_pending,omitempty"`
	OldestPendingAgeSec float64    `json:"oldest_pending_age_seconds"`
	OldestDue           *time.Time `json:"oldest_due,omitempty"`
	OldestDueAgeSec     float64    `json:"oldest_due_age_seconds"`
	Dead                int64      `json:"dead"`
	Published           int64      `json:"published_kept"`
}

type blockedJSON struct {
	Topic       string    `json:"topic"`
	Key         string    `json:"key"`
	Head        uuid.UUID `json:"head_id"`
	Type        string    `json:"head_type"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	NextAttempt time.Time `json:"next_attempt"`
	Behind      int64     `json:"behind"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func ageSec(t, now time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t).Seconds()
}

func writeStatusJSON(out io.Writer, st []stores.TopicStats, blocked []stores.BlockedKey, more bool, slots *slotReport, now time.Time) error {
	topics := make([]topicJSON, 0, len(st))
	for _, ts := range st {
		topics = append(topics, topicJSON{
			Topic: ts.Topic, Pending: ts.Pending, Due: ts.Due, Scheduled: ts.Scheduled, Retrying: ts.Retrying,
			OldestPending: timePtr(ts.OldestPending), OldestPendingAgeSec: ageSec(ts.OldestPending, now),
			OldestDue: timePtr(ts.OldestDue), OldestDueAgeSec: ageSec(ts.OldestDue, now),
			Dead: ts.Dead, Published: ts.Published,
		})
	}
	bl := make([]blockedJSON, 0, len(blocked))
	for _, b := range blocked {
		bl = append(bl, blockedJSON{Topic: b.Head.Topic, Key: b.Head.Key, Head: b.Head.ID, Type: b.Head.Type,
			Attempts: b.Head.Attempts, LastError: b.Head.LastError, NextAttempt: b.NextAttempt, Behind: b.Behind})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	obj := map[string]any{"topics": topics, "blocked": bl, "blocked_truncated": more}
	slotsJSON(obj, slots)
	return enc.Encode(obj)
}
