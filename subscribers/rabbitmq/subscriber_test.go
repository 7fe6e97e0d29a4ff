package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
	rabbitsub "github.com/outboxgo/outbox/subscribers/rabbitmq"
	"github.com/outboxgo/outbox/subscribers/subscribertest"
)

// New checks the config; Start checks that the queue exists.
func TestConfigChecks(t *testing.T) {
	in := inbox.New[pgx.Tx](nil, nil)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]rabbitsub.Config{
		"no queue":          {DeadLetterRoutingKey: "d"},
		"no dead letters":   {Queue: "q"},
		"dead is the queue": {Queue: "q", DeadLetterRoutingKey: "q"},
		"bad url":           {URL: "http://x", Queue: "q", DeadLetterRoutingKey: "d"},
		"negative max":      {Queue: "q", DeadLetterRoutingKey: "d", MaxDeliveries: -1},
		"backoff min > max": {Queue: "q", DeadLetterRoutingKey: "d", Backoff: rabbitsub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"concurrency":       {Queue: "q", DeadLetterRoutingKey: "d", Concurrency: -1},
	} {
		if _, err := rabbitsub.New(in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
	e := newEnv(t, rabbitURL())
	cfg := e.config(subscribertest.Config{})
	cfg.Queue = e.queue + "-missing"
	s, err := rabbitsub.New(in, nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		_ = s.Stop(context.Background())
		t.Fatal("Start on a missing queue succeeded")
	}
}
