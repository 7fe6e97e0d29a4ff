package faults

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// The test binary is also the suite's relays and its inbox consumer:
// TestMain runs one of those instead of the tests when envHelper is set.
// The rest of the environment says which database and broker, and where.
const (
	envHelper     = "OUTBOX_FAULTS_HELPER"      // "run", "hold-claim", "hold-publish", "inbox" or "cdc"
	envDBKind     = "OUTBOX_FAULTS_DB_KIND"     // "postgres" or "mariadb"
	envDB         = "OUTBOX_FAULTS_DB"          // the database's URL or DSN
	envSchema     = "OUTBOX_FAULTS_SCHEMA"      // PostgreSQL's schema
	envBrokerKind = "OUTBOX_FAULTS_BROKER_KIND" // "nats", "rabbitmq", "kafka", "redis" or "pubsub"
	envBroker     = "OUTBOX_FAULTS_BROKER"      // the relays' way to the broker (the proxy)
	envBrokerDir  = "OUTBOX_FAULTS_BROKER_DIRECT"
	envPrefix     = "OUTBOX_FAULTS_PREFIX" // subject prefix, exchange or topic prefix
)

// Relay settings of the suite. A relay stopped longer than claimTimeout
// loses its claim to the others.
const (
	claimTimeout   = 2 * time.Second
	publishTimeout = time.Second
)

func TestMain(m *testing.M) {
	switch mode := os.Getenv(envHelper); mode {
	case "":
		code := m.Run()
		if alive := helpers.outlived(); alive != "" {
			fmt.Fprintln(os.Stderr, "FAIL: helper processes outlived the tests that started them (killed now):", alive)
			code = 1
		}
		os.Exit(code)
	case "inbox":
		os.Exit(helperExit(inboxProcess()))
	case "cdc":
		os.Exit(helperExit(cdcRelayProcess()))
	default:
		os.Exit(helperExit(relayProcess(mode)))
	}
}

func helperExit(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, os.Getenv(envHelper)+":", err)
		return 1
	}
	return 0
}

func helperLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// relayProcess is a relay in a process of its own, run until it is killed.
// In "hold-claim" mode it prints "held <ids>" once it has claimed a
// non-empty batch and then holds before publishing it; in "hold-publish"
// mode it prints it after the broker acknowledged a batch and holds before
// marking it. The parent SIGKILLs it there.
func relayProcess(mode string) error {
	ctx := context.Background()
	log := helperLogger()
	var (
		s   stores.Store
		err error
	)
	switch k := os.Getenv(envDBKind); k {
	case "postgres":
		s, err = pgRelayStore(ctx)
	case "mariadb":
		s, err = mariaRelayStore(ctx)
	default:
		err = fmt.Errorf("unknown %s %q", envDBKind, k)
	}
	if err != nil {
		return err
	}
	var pub publishers.Publisher
	switch k := os.Getenv(envBrokerKind); k {
	case "nats":
		pub, err = natsRelayPublisher(log)
	case "rabbitmq":
		pub, err = rabbitRelayPublisher(log)
	case "kafka":
		pub, err = kafkaRelayPublisher(log)
	case "redis":
		pub, err = redisRelayPublisher(log)
	case "pubsub":
		pub, err = pubsubRelayPublisher(log)
	default:
		err = fmt.Errorf("unknown %s %q", envBrokerKind, k)
	}
	if err != nil {
		return err
	}
	rcfg := &relay.Config{
		Workers:        2,
		BatchSize:      50,
		PollInterval:   100 * time.Millisecond,
		PublishTimeout: publishTimeout,
		// Only a permanent rejection makes an event dead; a keyed one then
		// lets its key go on.
		KeyedFailure:  relay.DeadLetterKey,
		MaxAttempts:   1000,
		RetryBackoff:  outbox.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
		OutageBackoff: outbox.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
		Logger:        log,
		// For checking that the suite can fail: OUTBOX_FAULTS_UNORDERED=1
		// turns per-key order off, and the checker must see violations.
		Unordered: os.Getenv("OUTBOX_FAULTS_UNORDERED") == "1",
	}
	switch mode {
	case "run":
	case "hold-claim":
		pub = holdPublisher{Publisher: pub}
	case "hold-publish":
		rcfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) {
			if len(msgs) == 0 {
				return
			}
			fmt.Println("held", ids(msgs))
			select {} // between publish and mark until killed
		}
	default:
		return fmt.Errorf("unknown %s %q", envHelper, mode)
	}
	r, err := relay.New(s, pub, rcfg)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// inboxProcess is the consumer side in a process of its own, run until it
// is killed: the broker's subscriber hands each message to the inbox,
// which applies its effect — one row in the effects table — in the same
// transaction that records the message, so a redelivery changes nothing.
func inboxProcess() error {
	ctx := context.Background()
	var (
		in  *inbox.Inbox[*sql.Tx]
		h   inbox.Handler[*sql.Tx]
		err error
	)
	switch k := os.Getenv(envDBKind); k {
	case "postgres":
		in, h, err = pgInbox(ctx)
	case "mariadb":
		in, h, err = mariaInbox(ctx)
	default:
		err = fmt.Errorf("unknown %s %q", envDBKind, k)
	}
	if err != nil {
		return err
	}
	switch k := os.Getenv(envBrokerKind); k {
	case "nats":
		err = natsSubscribe(ctx, in, h)
	case "rabbitmq":
		err = rabbitSubscribe(ctx, in, h)
	case "kafka":
		err = kafkaSubscribe(ctx, in, h)
	case "redis":
		err = redisSubscribe(ctx, in, h)
	case "pubsub":
		err = pubsubSubscribe(ctx, in, h)
	default:
		err = fmt.Errorf("unknown %s %q", envBrokerKind, k)
	}
	if err != nil {
		return err
	}
	fmt.Println("consuming")
	select {} // until killed
}

// startRetrying calls start (each call bounded by 5 s) until it succeeds
// or ctx ends, 100 ms apart: the inbox process may start while the broker
// is down, and its subscriber's Start fails then.
func startRetrying(ctx context.Context, start func(context.Context) error) error {
	for i := 0; ; i++ {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := start(sctx)
		cancel()
		if err == nil {
			return nil
		}
		if i%50 == 0 {
			fmt.Fprintln(os.Stderr, "inbox: start the subscriber (retrying):", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// holdPublisher holds the first non-empty batch it is given, claimed and
// not yet published, until the process is killed.
type holdPublisher struct{ publishers.Publisher }

func (h holdPublisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	if len(msgs) > 0 {
		fmt.Println("held", ids(msgs))
		select {} // between claim and publish until killed
	}
	return h.Publisher.Publish(ctx, msgs)
}

func ids(msgs []outbox.Message) string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = m.ID.String()
	}
	return strings.Join(s, ",")
}
