package redis_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/postgres/pginbox"
	redissub "github.com/outboxgo/outbox/redis/redissub"
)

func TestConfigChecks(t *testing.T) {
	in := inbox.New[pgx.Tx](nil, nil)
	rdb := goredis.NewClient(&goredis.Options{}) // never used: New fails first
	defer func() { _ = rdb.Close() }()
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	for name, c := range map[string]redissub.Config{
		"no streams":        {Group: "g", DeadLetterStream: "d"},
		"no group":          {Streams: []string{"s"}, DeadLetterStream: "d"},
		"no dead letters":   {Streams: []string{"s"}, Group: "g"},
		"dead is read":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "s"},
		"negative max":      {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", MaxDeliveries: -1},
		"backoff > idle":    {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", ClaimIdle: time.Second, Backoff: redissub.Backoff{Min: time.Second, Max: time.Minute}},
		"backoff min > max": {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Backoff: redissub.Backoff{Min: time.Second, Max: time.Millisecond}},
		"concurrency":       {Streams: []string{"s"}, Group: "g", DeadLetterStream: "d", Concurrency: -1},
	} {
		if _, err := redissub.New(rdb, in, nop, c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}

// TestClaimBacklogAtHandlerPace: a backlog of claimable entries (here a
// crashed consumer's) drains as fast as the handlers go, not at
// Concurrency entries per PollInterval: a claim that fills every free slot
// is followed by another as soon as a slot is free.
func TestClaimBacklogAtHandlerPace(t *testing.T) {
	const n = 30
	e := newEnv(t, "")
	pool := pgtest.Pool(t)
	d, err := pginbox.NewPgx(pool, &pginbox.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte("{}")}
	}
	e.publish(t, msgs...)
	const group = "backlog"
	e.orphan(t, subscribertest.Config{Group: group}, n)
	const claimIdle = 100 * time.Millisecond
	time.Sleep(claimIdle) // every orphaned entry is claimable

	var handled atomic.Int64
	cfg := redissub.Config{Streams: []string{e.stream()}, StreamPrefix: e.prefix, Group: group,
		DeadLetterStream: e.deadStream(), ClaimIdle: claimIdle, PollInterval: time.Minute,
		Block: 50 * time.Millisecond, Concurrency: 1, Backoff: redissub.Backoff{Min: 10 * time.Millisecond, Max: claimIdle},
		Hooks: redissub.Hooks{AfterCommit: func(inbox.Message, inbox.Outcome) { handled.Add(1) }}}
	sub, err := redissub.New(e.sub, inbox.New(d, nil), func(context.Context, pgx.Tx, inbox.Message) error { return nil }, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Stop(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for handled.Load() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := handled.Load(); got < n {
		t.Errorf("%d of %d claimable entries handled in 10s with PollInterval 1m and Concurrency 1", got, n)
	}
}

// TestRefusedMidRunLogsError: a subscriber whose credentials Redis stops
// accepting while it runs says so at level Error, not as a passing
// warning, and Stop still returns.
func TestRefusedMidRunLogsError(t *testing.T) {
	s := startPrivateRedis(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: adminPassword, MaxRetries: -1})
	defer func() { _ = rdb.Close() }()
	logs := &recordHandler{}
	cfg := redissub.Config{Streams: []string{"orders"}, Group: "g", DeadLetterStream: "dead",
		PollInterval: 10 * time.Millisecond, Block: 10 * time.Millisecond, Logger: slog.New(logs)}
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	sub, err := redissub.New(rdb, inbox.New[pgx.Tx](nil, nil), nop, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Stop(context.Background()) }()
	// A new password, and every connection dropped: the next ones are
	// refused.
	if err := s.admin.ConfigSet(ctx, "requirepass", "changed").Err(); err != nil {
		t.Fatal(err)
	}
	_ = s.admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal").Err()
	for !logs.has(slog.LevelError, "WRONGPASS") {
		if ctx.Err() != nil {
			t.Fatalf("no error logged for the refused credentials; logs: %v", logs.all())
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
