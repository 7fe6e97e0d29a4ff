package outboxcli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

func newReplay(g *globals) *cobra.Command {
	var (
		from, to, topic, key string
		limit                int
		asJSON               bool
	)
	cmd := &cobra.Command{
		Use:   "replay --from T --to T",
		Short: "Send published events of a time range again (kept by relay --retention), with their IDs",
		Long: `replay makes published events created in [--from, --to) — of --topic and
--key when given — pending again, the oldest --limit of them, so the relay
sends them again with their IDs unchanged. Times are RFC 3339
(2026-01-02T15:04:05Z). Run it again for more.

Only events still in the table can be sent again: a relay keeps published
events only with --retention (marked published for that long, then purged);
without it, it deletes each event once the broker has it. When the range
holds no published event, replay says so and fails.

Order and inboxes. A key's re-sent events go out in their original order,
but after the key's newer events that consumers already have: a replay
rewinds the key. Inbox consumers deduplicate by event ID and drop every
event they recorded, so a replay is for a consumer that lost its state (its
inbox with it) or a new consumer. (Earlier releases' 'outbox replay' retried
dead events: that is now 'outbox dead retry'.)

--json prints {"republished": N, "from": time, "to": time, "more": bool}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			c.notEmpty("from", from, "the start of the range (RFC 3339)")
			c.notEmpty("to", to, "the end of the range (RFC 3339)")
			p := stores.RepublishParams{From: c.timeFlag("from", from), To: c.timeFlag("to", to),
				Topic: topic, Key: key, Limit: limit}
			if !p.From.IsZero() && !p.To.IsZero() && !p.From.Before(p.To) {
				c.add(fmt.Errorf("--from %s is not before --to %s: the range is empty", display(from), display(to)))
			}
			c.intIn("limit", limit, 1, maxListLimit)
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			p.Now = time.Now()
			n, err := d.store.Republish(ctx, p)
			if err != nil {
				return schemaMissing(err, d)
			}
			if n == 0 {
				return errors.New("no published events created in that range" + replayScope(topic, key) +
					" are in the table: replayed none (a relay keeps published events only with --retention, and purges them after it)")
			}
			res := replayJSON{Republished: n, From: p.From.UTC(), To: p.To.UTC(), More: n == int64(limit)}
			if asJSON {
				return g.printJSON(res)
			}
			more := ""
			if res.More {
				more = "; there may be more: run again (or raise --limit, at most " + fmt.Sprint(maxListLimit) + ")"
			}
			fmt.Fprintf(g.stdout, "replayed %d published events created from %s to %s%s\n", n,
				res.From.Format(time.RFC3339Nano), res.To.Format(time.RFC3339Nano), more)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "send again events created at or after this time (RFC 3339)")
	fl.StringVar(&to, "to", "", "… and before this time (RFC 3339)")
	fl.StringVar(&topic, "topic", "", "only this topic")
	fl.StringVar(&key, "key", "", "only this key")
	fl.IntVar(&limit, "limit", 1000, fmt.Sprintf("send at most this many, 1 to %d", maxListLimit))
	fl.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// replayJSON is the --json of replay.
type replayJSON struct {
	Republished int64     `json:"republished"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	More        bool      `json:"more"`
}

// replayScope is " (topic T, key K)" for what replay was narrowed to.
func replayScope(topic, key string) string {
	switch {
	case topic != "" && key != "":
		return " of topic " + display(topic) + " and key " + display(key)
	case topic != "":
		return " of topic " + display(topic)
	case key != "":
		return " of key " + display(key)
	}
	return ""
}
