// Command outbox runs the transactional outbox's relay and its tools:
// migrate, relay, status, dead, replay. Run `outbox help` for the list.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := outboxcli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
