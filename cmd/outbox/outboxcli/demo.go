package outboxcli

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/outboxgo/outbox/examples/saga"
)

func newDemo(g *globals) *cobra.Command {
	var o saga.Options
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
published again, and the inbox drops the redelivery.

The run ends with a verification (every confirmed order has exactly one
reservation: none lost, none applied twice) and exits non-zero if it fails.
The code is examples/saga in the outbox repository.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("log-level") || cmd.Flags().Changed("log-format") {
				log, err := g.logger()
				if err != nil {
					return err
				}
				o.Logger = log
			} else {
				o.Logger = slog.New(slog.DiscardHandler) // the progress lines tell the story
			}
			if o.Outage == 0 {
				o.Outage = -1 // --outage 0: no outage (Options' zero means the default)
			}
			_, err := saga.Run(cmd.Context(), o, g.stdout)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Orders, "orders", saga.DefaultOrders, "how many orders to confirm")
	f.DurationVar(&o.Outage, "outage", saga.DefaultOutage, "how long the broker is down, midway (0: no outage)")
	f.IntVar(&o.Relays, "relays", saga.DefaultRelays, "relays draining each service's outbox")
	f.BoolVar(&o.Crash, "crash", false, "make a relay die between publish and mark, once")
	f.StringVar(&o.DataDir, "data-dir", "", "keep the SQLite files and the broker's store in this directory (default: a temporary directory, removed at the end)")
	f.DurationVar(&o.Timeout, "timeout", time.Minute, "how long to wait for the saga to complete after the last order")
	return cmd
}
