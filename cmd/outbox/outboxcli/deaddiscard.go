package outboxcli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

// discardPage is how many dead events `dead discard --all` deletes per
// statement.
const discardPage = 1000

func newDeadDiscard(g *globals) *cobra.Command {
	var (
		sel deadList
		all bool
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "discard [ID...]",
		Short: "Delete dead events for good (by ID, or --all of a selection with --yes)",
		Long: `dead discard deletes dead events: they are gone, never published. Name them
by ID, or choose --all, narrowed by --topic, --key and --older-than
(created longer ago than this). Only dead events are deleted: a named event
that is pending or published is left alone.

--all deletes every dead event of the selection, however many, so it asks
for --yes; without it, it says how many it would delete and deletes none.

--json prints {"discarded": N, "named": N (IDs given), "matched": N (with
--all: the dead events of the selection)}.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			sel.checkIDsOrAll(cmd, c, "discard", ids, all)
			p := sel.params(c, time.Now())
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			res := discardJSON{Named: len(ids)}
			if len(ids) > 0 {
				if res.Discarded, err = d.store.Discard(ctx, stores.DiscardParams{IDs: ids}); err != nil {
					return schemaMissing(err, d)
				}
			} else {
				if res.Matched, err = d.store.DeadCount(ctx, p); err != nil {
					return schemaMissing(err, d)
				}
				if !yes {
					return fmt.Errorf("would discard %d dead events (%s): discarded none; pass --yes to discard them", res.Matched, sel.describe())
				}
				if res.Discarded, err = discardAll(ctx, d.store, p); err != nil {
					return schemaMissing(err, d)
				}
			}
			switch {
			case sel.asJSON:
				return g.printJSON(res)
			case len(ids) > 0:
				fmt.Fprintf(g.stdout, "discarded %d of %d named events (the others were not dead)\n", res.Discarded, len(ids))
			default:
				fmt.Fprintf(g.stdout, "discarded %d dead events (%s)\n", res.Discarded, sel.describe())
			}
			return nil
		},
	}
	fl := cmd.Flags()
	sel.allFlags(cmd, "720h")
	fl.BoolVar(&all, "all", false, "discard every dead event of the selection (asks for --yes)")
	fl.BoolVar(&yes, "yes", false, "with --all: yes, delete them for good")
	return cmd
}

// discardJSON is the --json of dead discard.
type discardJSON struct {
	Discarded int64 `json:"discarded"`
	Named     int   `json:"named"`
	Matched   int64 `json:"matched"`
}

// discardAll discards the dead events p selects, a page at a time, each
// page after the last: it ends however many die meanwhile.
func discardAll(ctx context.Context, s stores.Store, p stores.DeadParams) (int64, error) {
	var n int64
	p.Limit = discardPage
	for {
		recs, err := s.Dead(ctx, p)
		if err != nil || len(recs) == 0 {
			return n, err
		}
		k, err := s.Discard(ctx, stores.DiscardParams{IDs: recordIDs(recs)})
		n += k
		if err != nil || len(recs) < discardPage {
			return n, err
		}
		after := recs[len(recs)-1].Cursor()
		p.After = &after
	}
}

// describe says in words what the selection is: "topic orders, created
// before 2026-01-02T03:04:05Z", or "all".
func (f *deadList) describe() string {
	var s string
	add := func(part string) {
		if s != "" {
			s += ", "
		}
		s += part
	}
	if f.topic != "" {
		add("topic " + display(f.topic))
	}
	if f.key != "" {
		add("key " + display(f.key))
	}
	if f.olderThan > 0 {
		add("created more than " + f.olderThan.String() + " ago")
	}
	if s == "" {
		return "every dead event"
	}
	return s
}
