package nats_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/subscribers"
)

// NewSubscriber checks the config; Start checks that a stream captures the
// dead-letter subject and that the consumer does not read it.
func TestConfigChecks(t *testing.T) {
	e := newSubEnv(t, natstest.URL())
	in := new(inbox.Inbox[pgx.Tx]) // never reached: Start fails first
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]*outboxnats.SubscriberConfig{
		"nil config":           nil,
		"no stream":            {Durable: "d", DeadLetterSubject: "x.y"},
		"no durable":           {Stream: "s", DeadLetterSubject: "x.y"},
		"no dead letters":      {Stream: "s", Durable: "d"},
		"wildcard dead":        {Stream: "s", Durable: "d", DeadLetterSubject: "x.*"},
		"bad filter":           {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", FilterSubjects: []string{"a..b"}},
		"bad prefix":           {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", SubjectPrefix: "a b"},
		"negative deliver":     {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Options: subscribers.Options{MaxDeliveries: -1}},
		"backoff min > max":    {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Options: subscribers.Options{Backoff: outbox.Backoff{Min: time.Second, Max: time.Millisecond}}},
		"negative concurrency": {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Options: subscribers.Options{Concurrency: -1}},
		"negative shutdown":    {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", Options: subscribers.Options{ShutdownTimeout: -time.Second}},
		"negative ack wait":    {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", AckWait: -time.Second},
		"tiny ack wait":        {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", AckWait: time.Microsecond},
		"negative ack pending": {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", MaxAckPending: -1},
		"negative ack timeout": {Stream: "s", Durable: "d", DeadLetterSubject: "x.y", AckTimeout: -time.Second},
	} {
		if _, err := outboxnats.NewSubscriber(e.js, in, nop, c); err == nil {
			t.Errorf("%s: NewSubscriber accepted %+v", name, c)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(cfg *outboxnats.SubscriberConfig) error {
		s, err := outboxnats.NewSubscriber(e.js, in, nop, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			return err
		}
		return s.Stop(ctx)
	}
	cfg := e.config(subscribertest.Config{Group: "checks"})
	cfg.DeadLetterSubject = "nobody.captures.this"
	if err := start(cfg); err == nil || !strings.Contains(err.Error(), "no stream captures") {
		t.Fatalf("Start with an uncaptured dead-letter subject = %v", err)
	}
	cfg.DeadLetterSubject = e.prefix + ".dead"
	if err := start(cfg); err == nil || !strings.Contains(err.Error(), "one this consumer reads") {
		t.Fatalf("Start with a dead-letter subject the consumer reads = %v", err)
	}
	cfg.FilterSubjects = []string{e.prefix + ".orders"}
	if err := start(cfg); err != nil { // the filter leaves the dead letters out
		t.Fatalf("Start with a filter that leaves the dead letters out = %v", err)
	}
}
