package faulttest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	natspub "github.com/outboxgo/outbox/publishers/nats"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores/postgres"
)

// Environment of the relay subprocess that TestMain runs instead of tests.
const (
	envHelper = "OUTBOX_FAULTS_HELPER" // "run", "hold-claim" or "hold-publish"
	envDB     = "OUTBOX_FAULTS_DB"     // database URL, application_name included
	envSchema = "OUTBOX_FAULTS_SCHEMA"
	envNATS   = "OUTBOX_FAULTS_NATS" // the proxy in front of the private broker
	envPrefix = "OUTBOX_FAULTS_PREFIX"
)

// Relay settings of the suite. A relay stopped longer than claimTimeout
// loses its claim to the others.
const (
	claimTimeout   = 2 * time.Second
	publishTimeout = time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		os.Exit(relayProcess())
	}
	os.Exit(m.Run())
}

// relayProcess is a relay in a process of its own, run until it is killed.
// In "hold-claim" mode it prints "held <ids>" once it has claimed a
// non-empty batch and then holds before publishing it; in "hold-publish"
// mode it prints it after the broker acknowledged a batch and holds before
// marking it. The parent SIGKILLs it there.
func relayProcess() int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pcfg, err := pgxpool.ParseConfig(os.Getenv(envDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg) // connects lazily: survives a database down at start
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := postgres.New(pool, &postgres.Config{Schema: os.Getenv(envSchema), ClaimTimeout: claimTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// RetryOnFailedConnect: a relay restarted while the broker (or the path
	// to it) is down starts anyway and connects when it can.
	pub, err := natspub.New(natspub.Config{URL: os.Getenv(envNATS), SubjectPrefix: os.Getenv(envPrefix),
		Name: "outbox-faults-relay", ReconnectWait: 50 * time.Millisecond, AckTimeout: 5 * time.Second,
		Options: []nats.Option{nats.RetryOnFailedConnect(true)}, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
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
		RetryBackoff:  relay.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
		OutageBackoff: relay.Backoff{Min: 50 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
		Logger:        log,
		// For checking that the suite can fail: OUTBOX_FAULTS_UNORDERED=1
		// turns per-key order off, and the checker must see violations.
		Unordered: os.Getenv("OUTBOX_FAULTS_UNORDERED") == "1",
	}
	var p publishers.Publisher = pub
	switch os.Getenv(envHelper) {
	case "hold-claim":
		p = holdPublisher{Publisher: pub}
	case "hold-publish":
		rcfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) {
			if len(msgs) == 0 {
				return
			}
			fmt.Println("held", ids(msgs))
			select {} // between publish and mark until killed
		}
	}
	r, err := relay.New(s, p, rcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
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
