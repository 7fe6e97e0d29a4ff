package outboxcli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/stores"
)

// maxListLimit bounds --limit of dead and replay.
const maxListLimit = 10000

// deadList is what `dead` and `dead list` take: the selection and the
// page.
type deadList struct {
	topic, key, after string
	olderThan         time.Duration
	limit             int
	asJSON            bool
}

func (f *deadList) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "only this topic")
	fl.StringVar(&f.key, "key", "", "only this key")
	fl.DurationVar(&f.olderThan, "older-than", 0, "only events created longer ago than this (Go duration: 90m, 24h)")
	fl.StringVar(&f.after, "after", "", "the next page: the cursor the previous page printed")
	fl.IntVar(&f.limit, "limit", 100, fmt.Sprintf("list at most this many, 1 to %d", maxListLimit))
	fl.BoolVar(&f.asJSON, "json", false, "print JSON instead of a table (exact strings)")
}

// checkIDsOrAll adds to c what is wrong with how a command that acts on
// dead events (dead retry, dead discard; verb: "retry", "discard") names
// them: by IDs, or --all of the selection, never both.
func (f *deadList) checkIDsOrAll(cmd *cobra.Command, c *checks, verb string, ids []uuid.UUID, all bool) {
	switch {
	case len(ids) == 0 && !all:
		c.add(fmt.Errorf("name the events to %s by ID, or pass --all", verb))
	case len(ids) > 0 && all:
		c.add(errors.New("give IDs or --all, not both"))
	case len(ids) > 0 && (f.topic != "" || f.key != "" || cmd.Flags().Changed("older-than")):
		c.add(errors.New("--topic, --key and --older-than go with --all, not with IDs"))
	}
}

// allFlags are the selection flags of a command that acts on --all dead
// events; example is an --older-than duration for its help.
func (f *deadList) allFlags(cmd *cobra.Command, example string) {
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "with --all: only this topic")
	fl.StringVar(&f.key, "key", "", "with --all: only this key")
	fl.DurationVar(&f.olderThan, "older-than", 0, "with --all: only events created longer ago than this (Go duration: "+example+")")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON instead of text")
}

const deadListLong = `lists dead events (those that exhausted their attempts, or were
dead-lettered), oldest first (by creation time, then ID), with their last
error: at most --limit, then the number of dead events that match in all
and, when there are more, the cursor of the next page:

  outbox dead list --topic orders --older-than 24h
  outbox dead list --topic orders --older-than 24h --after 2026-01-02T03:04:05.123456Z,0194…

A cursor is a position, not an offset: events that die or are discarded
meanwhile do not shift the next page. Keep the same filters from page to
page (with --older-than the bound moves with the clock).

Control characters in topics, keys, types and errors are shown escaped
("a\nb"); --json carries the exact strings:
{"dead": [{"id", "topic", "key", "type", "headers", "created_at",
"attempts", "last_error"}…], "total": N, "more": bool, "next": "cursor"}
("next" only when "more").`

func newDead(g *globals) *cobra.Command {
	var f deadList
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "List, show, retry and discard dead events (with no subcommand: dead list)",
		Long: "dead " + deadListLong + `

Subcommands: list (the default), show, retry, discard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(g, cmd) },
	}
	f.flags(cmd)
	var lf deadList
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead events with their last error, a page at a time",
		Long:  "dead list " + deadListLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return lf.run(g, cmd) },
	}
	lf.flags(list)
	cmd.AddCommand(list, newDeadShow(g), newDeadRetry(g), newDeadDiscard(g))
	return cmd
}

// params checks the flags and returns the selection (no page bounds).
func (f *deadList) params(c *checks, now time.Time) stores.DeadParams {
	return stores.DeadParams{Topic: f.topic, Key: f.key, CreatedBefore: c.ageFlag("older-than", f.olderThan, now)}
}

func (f *deadList) run(g *globals, cmd *cobra.Command) error {
	c := g.checks(cmd)
	c.intIn("limit", f.limit, 1, maxListLimit)
	p := f.params(c, time.Now())
	if f.after != "" {
		after, err := parseCursor(f.after)
		if err != nil {
			c.failf("after", "%v", err)
		}
		p.After = after
	}
	d, err := g.openChecked(cmd, c)
	if err != nil {
		return err
	}
	defer d.close()
	ctx := cmd.Context()
	p.Limit = f.limit + 1 // one more, to tell whether there are more
	recs, err := d.store.Dead(ctx, p)
	if err != nil {
		return schemaMissing(err, d)
	}
	total, err := d.store.DeadCount(ctx, p)
	if err != nil {
		return schemaMissing(err, d)
	}
	more := len(recs) > f.limit
	recs = recs[:min(len(recs), f.limit)]
	next := ""
	if more {
		next = formatCursor(recs[len(recs)-1].Cursor())
	}
	if f.asJSON {
		return writeDeadJSON(g, recs, total, next)
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
	fmt.Fprintf(g.stdout, "%d listed, %d dead events match in all\n", len(recs), total)
	if more {
		fmt.Fprintf(g.stdout, "… more: next page with --after %s\n", next)
	}
	return nil
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

func deadJSONOf(r stores.Record) deadJSON {
	return deadJSON{ID: r.ID, Topic: r.Topic, Key: r.Key, Type: r.Type, Headers: r.Headers,
		CreatedAt: r.CreatedAt.UTC(), Attempts: r.Attempts, LastError: r.LastError}
}

// deadPage is the --json of dead list.
type deadPage struct {
	Dead  []deadJSON `json:"dead"`
	Total int64      `json:"total"`
	More  bool       `json:"more"`
	Next  string     `json:"next,omitempty"`
}

func writeDeadJSON(g *globals, recs []stores.Record, total int64, next string) error {
	out := deadPage{Dead: make([]deadJSON, 0, len(recs)), Total: total, More: next != "", Next: next}
	for _, r := range recs {
		out.Dead = append(out.Dead, deadJSONOf(r))
	}
	return g.printJSON(out)
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
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dead-letter ID...",
		Short: "Make pending events dead by hand (to let a key go on past an event that keeps failing)",
		Long: `dead-letter makes the named pending events dead. With per-key order, a keyed
event that keeps failing holds its key's later events back ('outbox status'
lists such keys); dead-lettering it lets them go.

The event keeps the broker's last error, with --reason beside it: its last
error reads "<reason>; last error: <the broker's error>" (or the reason
alone for an event that never failed). Dead events stay listed by 'outbox
dead' and can be retried with 'outbox dead retry' — out of their key's
order, see 'outbox dead retry --help'.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args)
			if err != nil {
				return err
			}
			c := g.checks(cmd)
			c.notEmpty("reason", reason, "say why the events are dead-lettered")
			d, err := g.openChecked(cmd, c)
			if err != nil {
				return err
			}
			defer d.close()
			ctx := cmd.Context()
			n, err := d.store.DeadLetter(ctx, stores.DeadLetterParams{IDs: ids, Reason: reason})
			if err != nil {
				return schemaMissing(err, d)
			}
			if asJSON {
				return g.printJSON(map[string]any{"dead_lettered": n, "named": len(ids)})
			}
			fmt.Fprintf(g.stdout, "dead-lettered %d of %d events (the others were not pending)\n", n, len(ids))
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "dead-lettered by hand", "why: stored beside the event's last error, which is kept")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON instead of text: {"dead_lettered": N, "named": N}`)
	return cmd
}
