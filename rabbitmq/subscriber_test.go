package rabbitmq_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	rabbitsub "github.com/outboxgo/outbox/rabbitmq/rabbitsub"
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

// TestQueueDeletedMidRunLogsError: a queue deleted under a running
// subscriber is a refusal at every reconnection, logged at level Error,
// not as a passing warning; Stop still returns.
func TestQueueDeletedMidRunLogsError(t *testing.T) {
	e := newEnv(t, rabbitURL())
	logs := &recordHandler{}
	cfg := e.config(subscribertest.Config{})
	cfg.Logger = slog.New(logs)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	sub, err := rabbitsub.New(inbox.New[pgx.Tx](nil, nil), nop, cfg)
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
	for !logs.has(slog.LevelError, "NOT_FOUND") {
		if ctx.Err() != nil {
			t.Fatalf("no error logged for the missing queue; logs: %v", logs.all())
		}
		time.Sleep(10 * time.Millisecond)
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
