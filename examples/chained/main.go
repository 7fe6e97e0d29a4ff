// Command chained runs the command → notification flow: an API records a
// workspace_update_requested command in its transaction (outbox); a worker
// receives it (inbox), calls an external provider and, on success, records
// the inbox ID, clears the command row and enqueues
// workspace_update_completed in one transaction; a relay publishes both
// events to NATS JetStream. A provider failure leaves no notification: the
// command is retried, then dead-lettered.
//
// With PostgreSQL and NATS JetStream on localhost (it creates the schema
// chained_example and the streams CHAINED_EXAMPLE and CHAINED_EXAMPLE_DEAD):
//
//	go run ./examples/chained
//	go run ./examples/chained -fail   # the provider fails: no notification
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	dbURL := flag.String("database-url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	natsURL := flag.String("nats-url", "nats://127.0.0.1:4222", "NATS JetStream URL")
	fail := flag.Bool("fail", false, "make the provider fail every call")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dbURL, *natsURL, *fail); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dbURL, natsURL string, fail bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := Config{Schema: "chained_example", Stream: "CHAINED_EXAMPLE", Prefix: "chained", DeadSubject: "chained-dead.workspace-worker",
		MaxDeliver: 3, Retry: 200 * time.Millisecond}
	for name, subject := range map[string]string{cfg.Stream: cfg.Prefix + ".>", "CHAINED_EXAMPLE_DEAD": "chained-dead.>"} {
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
	}

	provider := func(ctx context.Context, workspaceID, name, key string) error {
		if fail {
			return errors.New("503 Service Unavailable")
		}
		fmt.Printf("provider: workspace %s renamed to %q (idempotency key %s)\n", workspaceID, name, key)
		return nil
	}
	app, err := NewApp(pool, cfg, provider)
	if err != nil {
		return err
	}
	if err := app.Migrate(ctx); err != nil {
		return err
	}
	// Watch for the outcome before anything happens.
	watch, err := js.OrderedConsumer(ctx, cfg.Stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{cfg.Prefix + "." + TopicCompleted}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	dead, err := js.OrderedConsumer(ctx, "CHAINED_EXAMPLE_DEAD", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return err
	}
	running, err := app.Start(ctx, natsURL, js)
	if err != nil {
		return err
	}
	defer func() { _ = running.Stop(context.Background()) }()

	id, err := app.RequestUpdate(ctx, "ws-1", fmt.Sprintf("renamed at %s", time.Now().Format(time.TimeOnly)))
	if err != nil {
		return err
	}
	fmt.Println("requested update, command", id)
	select {
	case m := <-next(ctx, watch):
		fmt.Printf("notification %s: %s\n", m.Subject(), m.Data())
	case m := <-next(ctx, dead):
		fmt.Printf("no notification; the command was dead-lettered: %s\n", m.Headers().Get("Outbox-Error"))
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// next delivers c's next message, or nothing when ctx ends.
func next(ctx context.Context, c jetstream.Consumer) <-chan jetstream.Msg {
	ch := make(chan jetstream.Msg, 1)
	go func() {
		for ctx.Err() == nil {
			m, err := c.Next(jetstream.FetchMaxWait(time.Second))
			if err == nil {
				ch <- m
				return
			}
		}
	}()
	return ch
}
