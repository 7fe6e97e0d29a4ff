// Command saga runs the saga demo of package examples/saga: the same as
// `outbox demo`.
//
//	go run ./examples/saga/cmd/saga -orders 500 -outage 3s -relays 2 -crash
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/outboxgo/outbox/examples/saga"
)

func main() {
	var o saga.Options
	flag.IntVar(&o.Orders, "orders", saga.DefaultOrders, "orders to confirm")
	flag.DurationVar(&o.Outage, "outage", saga.DefaultOutage, "how long the broker is down (negative: no outage)")
	flag.IntVar(&o.Relays, "relays", saga.DefaultRelays, "relays per outbox")
	flag.BoolVar(&o.Crash, "crash", false, "crash a relay between publish and mark")
	flag.StringVar(&o.DataDir, "data-dir", "", "keep the databases and the broker's store here (default: a temporary directory, removed)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	_, err := saga.Run(ctx, o, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "saga:", err)
		os.Exit(1)
	}
}
