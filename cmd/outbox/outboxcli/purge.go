package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

// purgeBatch is how many rows of a kind one purge statement deletes.
const purgeBatch = 1000

func newPurge(g *globals) *cobra.Command {
	var (
		published, dead time.Duration
		asJSON          bool
	)
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete published events past retention and dead events past an age",
		Long: `purge deletes, for good and in batches of 1,000:
  --published-older-than D  published events (kept by relay --retention)
                            published longer ago than D;
  --dead-older-than D       dead events created longer ago than D.
At least one is required. A relay with --retention purges published events
by itself; purge is for a one-off clean-up, or for dead events, which
nothing deletes by itself. Durations are Go's: 90m, 24h, 720h.

It prints how many of each it deleted; --json prints {"published": N,
"dead": N, "published_before": time, "dead_before": time} (a bound only
when its flag was given).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			now := time.Now()
			res := purgeJSON{}
			pubBefore := c.ageFlag("published-older-than", published, now)
			deadBefore := c.ageFlag("dead-older-than", dead, now)
			if !cmd.Flags().Changed("published-older-than") && !cmd.Flags().Changed("dead-older-than") {
				c.add(errors.New("say what to purge: --published-older-than, --dead-older-than or both"))
			}
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			if res.Published, err = purgeAll(ctx, d.store, stores.PurgeParams{Before: pubBefore}); err != nil {
				return schemaMissing(err, d)
			}
			if res.Dead, err = purgeAll(ctx, d.store, stores.PurgeParams{DeadBefore: deadBefore}); err != nil {
				return schemaMissing(err, d)
			}
			res.PublishedBefore, res.DeadBefore = utcOrNil(pubBefore), utcOrNil(deadBefore)
			if asJSON {
				return g.printJSON(res)
			}
			if res.PublishedBefore != nil {
				fmt.Fprintf(g.stdout, "purged %d published events (published before %s)\n", res.Published, res.PublishedBefore.Format(time.RFC3339))
			}
			if res.DeadBefore != nil {
				fmt.Fprintf(g.stdout, "purged %d dead events (created before %s)\n", res.Dead, res.DeadBefore.Format(time.RFC3339))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&published, "published-older-than", 0, "delete published events published longer ago than this")
	fl.DurationVar(&dead, "dead-older-than", 0, "delete dead events created longer ago than this")
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// purgeJSON is the --json of purge.
type purgeJSON struct {
	Published       int64      `json:"published"`
	Dead            int64      `json:"dead"`
	PublishedBefore *time.Time `json:"published_before,omitempty"`
	DeadBefore      *time.Time `json:"dead_before,omitempty"`
}

// purgeAll purges what p bounds (nothing when both bounds are zero), a
// batch at a time, until a batch comes back short.
func purgeAll(ctx context.Context, s stores.Store, p stores.PurgeParams) (int64, error) {
	if p.Before.IsZero() && p.DeadBefore.IsZero() {
		return 0, nil
	}
	p.Limit = purgeBatch
	var n int64
	for {
		k, err := s.Purge(ctx, p)
		n += k
		if err != nil || k < purgeBatch {
			return n, err
		}
	}
}
