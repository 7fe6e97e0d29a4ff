package outboxcli

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newReplay(g *globals) *cobra.Command {
	var (
		topic      string
		all        bool
		outOfOrder bool
		limit      int
	)
	cmd := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Make dead events pending again (by ID, or --all of a --topic)",
		Long: `replay makes dead events pending again, with their attempts reset, so the
relay publishes them. Name them by ID, or choose --all (optionally with
--topic): the oldest --limit dead events; run it again for more.

Keyed events and order. A dead keyed event is one its key went past: it was
dead-lettered (by --keyed-failure dead-letter, or by hand with 'outbox
dead-letter') and the key's later events were published while it was dead.
Replayed, it is published AFTER them: out of its key's order (a consumer of
key K sees 2, 3, then 1). And under --keyed-failure block (the default) it
becomes its key's head again: if it still fails, it blocks the key anew,
holding back every later event of the key, including those enqueued after
the replay, until it succeeds or is dead-lettered again.

So replay lists every keyed event it would replay, and replays none of them
unless --out-of-order says that is what you want.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			switch {
			case len(ids) == 0 && !all:
				c.add(fmt.Errorf("name the events to replay by ID, or pass --all"))
			case len(ids) > 0 && all:
				c.add(fmt.Errorf("give IDs or --all, not both"))
			case len(ids) > 0 && topic != "":
				c.add(fmt.Errorf("--topic goes with --all, not with IDs"))
			}
			c.intIn("limit", limit, 1, maxListLimit)
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

			// What would be replayed: the named events that are dead, or
			// the oldest --limit dead events of --topic.
			p := stores.DeadParams{IDs: ids, Limit: len(ids)}
			if all {
				p = stores.DeadParams{Topic: topic, Limit: limit + 1}
			}
			recs, err := d.store.Dead(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			lim := limit
			if len(ids) > 0 {
				recs, lim = only(recs, ids), len(ids)
			}
			more := len(recs) > lim
			recs = recs[:min(len(recs), lim)]
			var keyed int
			for _, r := range recs {
				if r.Key == "" {
					continue
				}
				keyed++
				fmt.Fprintf(g.stdout, "out of order: %s (topic %s, key %s) will be published after the later events of key %s\n",
					r.ID, display(r.Topic), display(r.Key), display(r.Key))
			}
			if keyed > 0 && !outOfOrder {
				return fmt.Errorf("%d keyed events would be published out of their key's order: replayed none; pass --out-of-order to replay them anyway (see 'outbox replay --help')", keyed)
			}
			var n int64
			if len(recs) > 0 { // an empty ReplayParams.IDs would mean every dead event
				pick := make([]uuid.UUID, len(recs))
				for i, r := range recs {
					pick[i] = r.ID
				}
				if n, err = d.store.Replay(ctx, stores.ReplayParams{IDs: pick, Now: time.Now()}); err != nil {
					return schemaMissing(err, d)
				}
			}
			switch {
			case len(ids) > 0:
				fmt.Fprintf(g.stdout, "replayed %d of %d named events (the others were not dead)\n", n, len(ids))
			case more:
				fmt.Fprintf(g.stdout, "replayed %d dead events; more remain: run again (or raise --limit, at most %d)\n", n, maxListLimit)
			default:
				fmt.Fprintf(g.stdout, "replayed %d dead events\n", n)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "with --all: only this topic")
	cmd.Flags().BoolVar(&all, "all", false, "replay the oldest --limit dead events (of --topic, when given)")
	cmd.Flags().BoolVar(&outOfOrder, "out-of-order", false, "replay keyed events too, although they will be published after their key's later events")
	cmd.Flags().IntVar(&limit, "limit", 1000, fmt.Sprintf("with --all: replay at most this many, 1 to %d", maxListLimit))
	return cmd
}

// only keeps the records whose ID is in ids.
func only(recs []stores.Record, ids []uuid.UUID) []stores.Record {
	want := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	out := recs[:0]
	for _, r := range recs {
		if want[r.ID] {
			out = append(out, r)
			delete(want, r.ID)
		}
	}
	return out
}
