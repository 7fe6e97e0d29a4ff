// Command outbox runs the transactional outbox's relay and its tools:
// migrate, relay, status, dead, dead-letter, replay, demo. Run `outbox help`
// for the list.
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
	go func() {
		// After the first signal, the next one kills at once: a command
		// that does not stop in time can still be ended.
		<-ctx.Done()
		stop()
	}()
	code := outboxcli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
