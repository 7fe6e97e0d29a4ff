package pgcdc_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/pgcdc"
)

// Stream the outbox of a PostgreSQL with wal_level=logical to NATS
// JetStream until SIGTERM. (It needs such a server and a role with the
// REPLICATION attribute, so it is compiled, not run, by go test.)
func Example() {
	pub, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: "nats://127.0.0.1:4222", Stream: "OUTBOX"})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := pub.SetupStream(ctx); err != nil {
		log.Fatal(err)
	}
	r, err := pgcdc.New(&pgcdc.Config{ConnString: "postgres://outbox_relay@127.0.0.1:5432/app"}, pub)
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
