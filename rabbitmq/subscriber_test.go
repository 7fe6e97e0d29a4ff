package rabbitmq_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/rabbitmq"
	"github.com/outboxgo/outbox/subscribers"
)

// NewSubscriber checks the config, naming the field at fault; Start
// checks that the queue exists.
func TestSubscriberConfigChecks(t *testing.T) {
	in := new(inbox.Inbox[pgx.Tx]) // never used: the config is refused first
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]struct {
		cfg  *rabbitmq.SubscriberConfig
		want string
	}{
		"nil config":        {nil, "Queue is required"},
		"no queue":          {&rabbitmq.SubscriberConfig{DeadLetterRoutingKey: "d"}, "Queue"},
		"no dead letters":   {&rabbitmq.SubscriberConfig{Queue: "q"}, "DeadLetterRoutingKey"},
		"dead is the queue": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "q"}, "itself"},
		"bad url":           {&rabbitmq.SubscriberConfig{URL: "http://x", Queue: "q", DeadLetterRoutingKey: "d"}, "URL"},
		"negative max": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d",
			Options: subscribers.Options{MaxDeliveries: -1}}, "MaxDeliveries"},
		"backoff min > max": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d",
			Options: subscribers.Options{Backoff: outbox.Backoff{Min: time.Second, Max: time.Millisecond}}}, "Backoff"},
		"concurrency": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d",
			Options: subscribers.Options{Concurrency: -1}}, "Concurrency"},
		"concurrency over the prefetch": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d",
			Options: subscribers.Options{Concurrency: 65536}}, "Concurrency"},
		"negative dial timeout":     {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d", DialTimeout: -1}, "DialTimeout"},
		"negative reconnect delay":  {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d", ReconnectDelay: -1}, "ReconnectDelay"},
		"negative confirm timeout":  {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d", ConfirmTimeout: -1}, "ConfirmTimeout"},
		"negative shutdown timeout": {&rabbitmq.SubscriberConfig{Queue: "q", DeadLetterRoutingKey: "d", Options: subscribers.Options{ShutdownTimeout: -1}}, "ShutdownTimeout"},
	} {
		if _, err := rabbitmq.NewSubscriber(in, nop, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewSubscriber(%+v) = %v, want an error naming %s", name, c.cfg, err, c.want)
		}
	}
	e := newSubEnv(t, rabbitURL())
	cfg := e.config(subscribertest.Config{})
	cfg.Queue = e.queue + "-missing"
	s, err := rabbitmq.NewSubscriber(in, nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err == nil {
		_ = s.Stop(context.Background())
		t.Fatal("Start on a missing queue succeeded")
	}
}

// TestQueueDeletedMidRunLogsError: a queue deleted under a running
// subscriber is a refusal at every reconnection, logged at level Error,
// not as a passing warning; Stop still returns.
func TestQueueDeletedMidRunLogsError(t *testing.T) {
	e := newSubEnv(t, rabbitURL())
	logs := &recordHandler{}
	cfg := e.config(subscribertest.Config{})
	cfg.Logger = slog.New(logs)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	sub, err := rabbitmq.NewSubscriber(new(inbox.Inbox[pgx.Tx]), nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Stop(context.Background()) }()
	if _, err := e.ch.QueueDelete(e.queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !logs.has(slog.LevelError, "NOT_FOUND") {
		select {
		case <-ctx.Done():
			t.Fatalf("no error logged for the missing queue; logs: %v", logs.all())
		case <-tick.C:
		}
	}
}

// recordHandler keeps every log record's level and text.
type recordHandler struct {
	mu   sync.Mutex
	recs []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, line)
	h.mu.Unlock()
	return nil
}

func (h *recordHandler) has(level slog.Level, text string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if strings.HasPrefix(r, level.String()+" ") && strings.Contains(r, text) {
			return true
		}
	}
	return false
}

func (h *recordHandler) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.recs...)
}
