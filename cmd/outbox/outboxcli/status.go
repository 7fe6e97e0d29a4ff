package outboxcli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newStatus(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show pending, dead and kept events per topic, and the age of the oldest pending",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := g.openDB(ctx)
			if err != nil {
				return err
			}
			defer d.close()
			st, err := d.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
			if err != nil {
				return schemaMissing(err, d)
			}
			now := time.Now()
			if asJSON {
				return writeStatusJSON(g, st, now)
			}
			return writeStatusTable(g, st, now)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// age is how long ago t was, rounded for people; "-" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

func writeStatusTable(g *globals, st []stores.TopicStats, now time.Time) error {
	w := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPENDING\tOLDEST PENDING\tDEAD\tPUBLISHED (KEPT)")
	var total stores.TopicStats
	for _, ts := range st {
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\n", ts.Topic, ts.Pending, age(ts.OldestPending, now), ts.Dead, ts.Published)
		total.Pending += ts.Pending
		total.Dead += ts.Dead
		total.Published += ts.Published
		if !ts.OldestPending.IsZero() && (total.OldestPending.IsZero() || ts.OldestPending.Before(total.OldestPending)) {
			total.OldestPending = ts.OldestPending
		}
	}
	fmt.Fprintf(w, "(all)\t%d\t%s\t%d\t%d\n", total.Pending, age(total.OldestPending, now), total.Dead, total.Published)
	return w.Flush()
}

type topicJSON struct {
	Topic               string     `json:"topic"`
	Pending             int64      `json:"pending"`
	OldestPending       *time.Time `json:"oldest_pending,omitempty"`
	OldestPendingAgeSec float64    `json:"oldest_pending_age_seconds"`
	Dead                int64      `json:"dead"`
	Published           int64      `json:"published_kept"`
}

func writeStatusJSON(g *globals, st []stores.TopicStats, now time.Time) error {
	out := make([]topicJSON, 0, len(st))
	for _, ts := range st {
		j := topicJSON{Topic: ts.Topic, Pending: ts.Pending, Dead: ts.Dead, Published: ts.Published}
		if !ts.OldestPending.IsZero() {
			o := ts.OldestPending
			j.OldestPending = &o
			j.OldestPendingAgeSec = now.Sub(o).Seconds()
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"topics": out})
}
