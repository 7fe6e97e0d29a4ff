package outboxcli

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newDeadRetry(g *globals) *cobra.Command {
	var (
		sel        deadList
		all        bool
		outOfOrder bool
	)
	cmd := &cobra.Command{
		Use:   "retry [ID...]",
		Short: "Make dead events pending again (by ID, or --all of a selection), to be published",
		Long: `dead retry makes dead events pending again, with their attempts reset, so
the relay publishes them. Name them by ID, or choose --all (optionally with
--topic, --key, --older-than): the oldest --limit dead events; run it again
for more. (Earlier releases called this 'outbox replay', which now
re-sends published events.)

Keyed events and order. A dead keyed event is one its key went past: it was
dead-lettered (by --keyed-failure dead-letter, or by hand with 'outbox
dead-letter') and the key's later events were published while it was dead.
Retried, it is published AFTER them: out of its key's order (a consumer of
key K sees 2, 3, then 1). And under --keyed-failure block (the default) it
becomes its key's head again: if it still fails, it blocks the key anew,
holding back every later event of the key, including those enqueued after
the retry, until it succeeds or is dead-lettered again.

So retry lists every keyed event it would retry, and retries none of them
unless --out-of-order says that is what you want.

--json prints {"retried": N, "named": N (IDs given), "more": bool,
"out_of_order": [{"id", "topic", "key"}…]}, also when it refuses.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			sel.checkIDsOrAll(cmd, c, "retry", ids, all)
			c.intIn("limit", sel.limit, 1, maxListLimit)
			p := sel.params(c, time.Now())
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()

			// What would be retried: the named events that are dead, or
			// the oldest --limit dead events of the selection.
			p.Limit = sel.limit + 1
			if len(ids) > 0 {
				p = stores.DeadParams{IDs: ids, Limit: len(ids)}
			}
			recs, err := d.store.Dead(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			lim := sel.limit
			if len(ids) > 0 {
				lim = len(ids)
			}
			more := len(recs) > lim
			recs = recs[:min(len(recs), lim)]
			res := retryJSON{Named: len(ids), More: more, OutOfOrder: []keyedJSON{}}
			for _, r := range recs {
				if r.Key == "" {
					continue
				}
				res.OutOfOrder = append(res.OutOfOrder, keyedJSON{ID: r.ID, Topic: r.Topic, Key: r.Key})
				if !sel.asJSON {
					fmt.Fprintf(g.stdout, "out of order: %s (topic %s, key %s) will be published after the later events of key %s\n",
						r.ID, display(r.Topic), display(r.Key), display(r.Key))
				}
			}
			if keyed := len(res.OutOfOrder); keyed > 0 && !outOfOrder {
				if sel.asJSON {
					if err := g.printJSON(res); err != nil {
						return err
					}
				}
				return fmt.Errorf("%d keyed events would be published out of their key's order: retried none; pass --out-of-order to retry them anyway (see 'outbox dead retry --help')", keyed)
			}
			if len(recs) > 0 { // an empty ReplayParams.IDs would mean every dead event
				if res.Retried, err = d.store.Replay(ctx, stores.ReplayParams{IDs: recordIDs(recs), Now: time.Now()}); err != nil {
					return schemaMissing(err, d)
				}
			}
			switch {
			case sel.asJSON:
				return g.printJSON(res)
			case len(ids) > 0:
				fmt.Fprintf(g.stdout, "retried %d of %d named events (the others were not dead)\n", res.Retried, len(ids))
			case more:
				fmt.Fprintf(g.stdout, "retried %d dead events; more remain: run again (or raise --limit, at most %d)\n", res.Retried, maxListLimit)
			default:
				fmt.Fprintf(g.stdout, "retried %d dead events\n", res.Retried)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	sel.allFlags(cmd, "24h")
	fl.BoolVar(&all, "all", false, "retry the oldest --limit dead events (of the selection, when given)")
	fl.BoolVar(&outOfOrder, "out-of-order", false, "retry keyed events too, although they will be published after their key's later events")
	fl.IntVar(&sel.limit, "limit", 1000, fmt.Sprintf("with --all: retry at most this many, 1 to %d", maxListLimit))
	return cmd
}

// retryJSON is the --json of dead retry.
type retryJSON struct {
	Retried    int64       `json:"retried"`
	Named      int         `json:"named"`
	More       bool        `json:"more"`
	OutOfOrder []keyedJSON `json:"out_of_order"`
}

// keyedJSON names a keyed event.
type keyedJSON struct {
	ID    uuid.UUID `json:"id"`
	Topic string    `json:"topic"`
	Key   string    `json:"key"`
}

// recordIDs returns the IDs of recs.
func recordIDs(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}
