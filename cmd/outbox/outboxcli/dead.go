package outboxcli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newDead(g *globals) *cobra.Command {
	var p stores.DeadParams
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "List dead events (those that exhausted their attempts) with their last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			d, err := g.openDB(ctx)
			if err != nil {
				return err
			}
			defer d.close()
			recs, err := d.store.Dead(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTOPIC\tKEY\tTYPE\tCREATED\tATTEMPTS\tLAST ERROR")
			for _, r := range recs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Topic, r.Key, r.Type,
					r.CreatedAt.UTC().Format(time.RFC3339), r.Attempts, r.LastError)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&p.Topic, "topic", "", "only this topic")
	cmd.Flags().IntVar(&p.Limit, "limit", 100, "list at most this many")
	return cmd
}

func newReplay(g *globals) *cobra.Command {
	var p stores.ReplayParams
	var all bool
	cmd := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Make dead events pending again (by ID, by --topic, or --all)",
		Long: `replay makes dead events pending again, with their attempts reset, so the
relay publishes them. Name them by ID, or choose --all (optionally with
--topic) to replay every dead event.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				id, err := uuid.Parse(a)
				if err != nil {
					return fmt.Errorf("%q is not an event ID (a UUID)", a)
				}
				p.IDs = append(p.IDs, id)
			}
			if len(p.IDs) == 0 && !all {
				return fmt.Errorf("name the events to replay by ID, or pass --all")
			}
			if len(p.IDs) > 0 && all {
				return fmt.Errorf("give IDs or --all, not both")
			}
			ctx := cmd.Context()
			d, err := g.openDB(ctx)
			if err != nil {
				return err
			}
			defer d.close()
			p.Now = time.Now()
			n, err := d.store.Replay(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			fmt.Fprintf(g.stdout, "replayed %d dead events\n", n)
			return nil
		},
	}
	cmd.Flags().StringVar(&p.Topic, "topic", "", "only this topic")
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead event (of --topic, when given)")
	return cmd
}

func newDeadLetter(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "dead-letter ID...",
		Short: "Make pending events dead by hand (to let a key go on past an event that keeps failing)",
		Long: `dead-letter makes the named pending events dead, with --reason as their last
error. With per-key order, a keyed event that keeps failing holds its key's
later events back; dead-lettering it lets them go. Dead events stay listed
by 'outbox dead' and can be replayed with 'outbox replay'.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := stores.DeadLetterParams{Reason: reason}
			for _, a := range args {
				id, err := uuid.Parse(a)
				if err != nil {
					return fmt.Errorf("%q is not an event ID (a UUID)", a)
				}
				p.IDs = append(p.IDs, id)
			}
			ctx := cmd.Context()
			d, err := g.openDB(ctx)
			if err != nil {
				return err
			}
			defer d.close()
			n, err := d.store.DeadLetter(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			fmt.Fprintf(g.stdout, "dead-lettered %d of %d events (the others were not pending)\n", n, len(p.IDs))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "dead-lettered by hand", "stored as the events' last error")
	return cmd
}
