package outboxcli

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/cmd/outbox/internal/saga"
)

// Bounds of the demo's flags, in --help.
const (
	maxDemoOrders = 100000
	maxDemoRelays = 16
)

// databaseFlags are the global flags the demo has no use for: it brings
// its own SQLite files.
var databaseFlags = []string{"database-url", "schema", "table"}

func newDemo(g *globals) *cobra.Command {
	var o saga.Options
	var uiAddr string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the outbox pattern's saga in-process: SQLite, embedded NATS, a broker outage, no setup",
		Long: `demo runs a saga between two services with nothing installed but Go.

The orders service confirms orders: each confirmation updates its orders row
and records an OrderConfirmed event in its outbox, in one SQLite transaction.
Relays drain the outbox to NATS JetStream, embedded in this process. The stock
service consumes OrderConfirmed through its inbox, reserves stock and records
StockReserved in its own outbox, in one transaction; the orders service
consumes StockReserved and marks the order reserved.

Midway the broker goes down for --outage: orders keep being confirmed (they
need only the database), the outbox backlog grows, and when the broker returns
it drains. With --crash a relay dies between publish and mark: its batch is
published again, and the inbox drops the redelivery. The orders are
confirmed over three times the outage (at least 1.5s), so --timeout must be
longer than that.

The run ends with a verification (every confirmed order has exactly one
reservation: none lost, none applied twice) and exits 1 if it fails, or if
the demo does not finish within --timeout; interrupted (Ctrl-C), it stops,
cleans up and exits 130. The code is cmd/outbox/internal/saga in the outbox repository.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c := g.checks(cmd)
			for _, name := range databaseFlags {
				if g.onCommandLine[name] {
					c.add(fmt.Errorf("--%s: the demo brings its own SQLite databases (see --data-dir)", name))
				}
			}
			c.intIn("orders", o.Orders, 1, maxDemoOrders)
			c.intIn("relays", o.Relays, 1, maxDemoRelays)
			c.durIn("outage", o.Outage, 0, time.Hour)
			c.durIn("timeout", o.Timeout, time.Second, 24*time.Hour)
			if uiAddr != "" {
				checkUIAddr(c, "ui", uiAddr, "", "the demo's dashboard takes no token: give a loopback address")
			}
			if err := c.err(); err != nil {
				return err
			}
			if o.Outage == 0 {
				o.Outage = -1 // --outage 0: no outage (Options' zero means the default)
			}
			if err := o.Validate(); err != nil {
				return fmt.Errorf("%w (see --timeout)", err)
			}
			if g.onCommandLine["log-level"] || g.onCommandLine["log-format"] {
				o.Logger = g.logger()
			} else {
				o.Logger = slog.New(slog.DiscardHandler) // the progress lines tell the story
			}
			if uiAddr != "" {
				o.Watch = &demoUI{ctx: cmd.Context(), addr: uiAddr, out: g.stdout, log: o.Logger}
			}
			_, err := saga.Run(cmd.Context(), o, g.stdout)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Orders, "orders", saga.DefaultOrders, fmt.Sprintf("how many orders to confirm, 1 to %d", maxDemoOrders))
	f.DurationVar(&o.Outage, "outage", saga.DefaultOutage, "how long the broker is down, midway, at most 1h (0: no outage)")
	f.IntVar(&o.Relays, "relays", saga.DefaultRelays, fmt.Sprintf("relays draining each service's outbox, 1 to %d", maxDemoRelays))
	f.BoolVar(&o.Crash, "crash", false, "make a relay die between publish and mark, once")
	f.StringVar(&o.DataDir, "data-dir", "", "keep the SQLite files and the broker's store in this directory (default: a temporary directory, removed at the end)")
	f.DurationVar(&o.Timeout, "timeout", saga.DefaultTimeout, "how long the whole demo may take, outage included, 1s to 24h")
	f.StringVar(&uiAddr, "ui", "", "serve the web dashboard of the orders service's outbox on this loopback host:port (--ui alone: "+defaultUIAddr+"), and keep it up after the run until Ctrl-C")
	f.Lookup("ui").NoOptDefVal = defaultUIAddr
	// The database flags are every other command's; hide them here.
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		for _, name := range databaseFlags {
			if fl := c.InheritedFlags().Lookup(name); fl != nil {
				fl.Hidden = true
			}
			if fl := c.Root().PersistentFlags().Lookup(name); fl != nil {
				fl.Hidden = true
			}
		}
		c.Root().HelpFunc()(c, args)
	})
	return cmd
}
