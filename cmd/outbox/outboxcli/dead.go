package outboxcli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

// maxListLimit bounds --limit of dead and replay.
const maxListLimit = 10000

func newDead(g *globals) *cobra.Command {
	var p stores.DeadParams
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "List dead events (those that exhausted their attempts, or were dead-lettered) with their last error",
		Long: `dead lists dead events, oldest first, with their last error: at most
--limit, and says so when there are more.

Control characters in topics, keys, types and errors are shown escaped
("a\nb"); --json carries the exact strings.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			c.intIn("limit", p.Limit, 1, maxListLimit)
			g.checkDB(c)
			if err := c.err(); err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := g.openDB(ctx, existing)
			if err != nil {
				return err
			}
			defer d.close()
			limit := p.Limit
			p.Limit++ // one more, to tell whether there are more
			recs, err := d.store.Dead(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			more := len(recs) > limit
			recs = recs[:min(len(recs), limit)]
			if asJSON {
				return writeDeadJSON(g, recs, more)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTOPIC\tKEY\tTYPE\tCREATED\tATTEMPTS\tLAST ERROR")
			for _, r := range recs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, display(r.Topic), display(r.Key), display(r.Type),
					r.CreatedAt.UTC().Format(time.RFC3339), r.Attempts, display(r.LastError))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if more {
				fmt.Fprintf(g.stdout, "… more dead events than the %d listed; raise --limit (at most %d) or choose a --topic\n", limit, maxListLimit)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&p.Topic, "topic", "", "only this topic")
	cmd.Flags().IntVar(&p.Limit, "limit", 100, fmt.Sprintf("list at most this many, 1 to %d", maxListLimit))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table (exact strings)")
	return cmd
}

type deadJSON struct {
	ID        uuid.UUID         `json:"id"`
	Topic     string            `json:"topic"`
	Key       string            `json:"key"`
	Type      string            `json:"type"`
	Headers   map[string]string `json:"headers,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	Attempts  int               `json:"attempts"`
	LastError string            `json:"last_error"`
}

func writeDeadJSON(g *globals, recs []stores.Record, more bool) error {
	out := make([]deadJSON, 0, len(recs))
	for _, r := range recs {
		out = append(out, deadJSON{ID: r.ID, Topic: r.Topic, Key: r.Key, Type: r.Type, Headers: r.Headers,
			CreatedAt: r.CreatedAt.UTC(), Attempts: r.Attempts, LastError: r.LastError})
	}
	enc := json.NewEncoder(g.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(map[string]any{"dead": out, "more": more})
}

// parseIDs parses event IDs given as arguments.
func parseIDs(args []string) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	for _, a := range args {
		id, err := uuid.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("%s is not an event ID (a UUID)", display(a))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func newDeadLetter(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "dead-letter ID...",
		Short: "Make pending events dead by hand (to let a key go on past an event that keeps failing)",
		Long: `dead-letter makes the named pending events dead. With per-key order, a keyed
event that keeps failing holds its key's later events back ('outbox status'
lists such keys); dead-lettering it lets them go.

The event keeps the broker's last error, with --reason beside it: its last
error reads "<reason>; last error: <the broker's error>" (or the reason
alone for an event that never failed). Dead events stay listed by 'outbox
dead' and can be replayed with 'outbox replay' — out of their key's order,
see 'outbox replay --help'.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			c.notEmpty("reason", reason, "say why the events are dead-lettered")
			g.checkDB(c)
			if err := c.err(); err != nil {
				return err
			}
			ctx := cmd.Context()
			d, err := g.openDB(ctx, existing)
			if err != nil {
				return err
			}
			defer d.close()
			n, err := d.store.DeadLetter(ctx, stores.DeadLetterParams{IDs: ids, Reason: reason})
			if err != nil {
				return schemaMissing(err, d)
			}
			fmt.Fprintf(g.stdout, "dead-lettered %d of %d events (the others were not pending)\n", n, len(ids))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "dead-lettered by hand", "why: stored beside the event's last error, which is kept")
	return cmd
}
