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
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/redis"
	"github.com/outboxgo/outbox/subscribers"
)

func TestSubscriberConfigChecks(t *testing.T) {
	in := new(inbox.Inbox[pgx.Tx])               // never used: the config is refused first
	rdb := goredis.NewClient(&goredis.Options{}) // never used: NewSubscriber fails first
	defer func() { _ = rdb.Close() }()
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	valid := func(edit func(*redis.SubscriberConfig)) redis.SubscriberConfig {
		c := redis.SubscriberConfig{Streams: []string{"s"}, Group: "g", DeadLetterStream: "d"}
		edit(&c)
		return c
	}
	for name, c := range map[string]struct {
		cfg  redis.SubscriberConfig
		want string // in the error: the field at fault
	}{
		"no streams":      {redis.SubscriberConfig{Group: "g", DeadLetterStream: "d"}, "Streams"},
		"no group":        {redis.SubscriberConfig{Streams: []string{"s"}, DeadLetterStream: "d"}, "Group"},
		"no dead letters": {redis.SubscriberConfig{Streams: []string{"s"}, Group: "g"}, "DeadLetterStream"},
		"dead is read":    {redis.SubscriberConfig{Streams: []string{"s"}, Group: "g", DeadLetterStream: "s"}, "DeadLetterStream"},
		"negative max":    {valid(func(c *redis.SubscriberConfig) { c.MaxDeliveries = -1 }), "MaxDeliveries"},
		"backoff > idle": {valid(func(c *redis.SubscriberConfig) {
			c.ClaimIdle, c.Backoff = time.Second, outbox.Backoff{Min: time.Second, Max: time.Minute}
		}), "ClaimIdle"},
		"backoff min > max": {valid(func(c *redis.SubscriberConfig) { c.Backoff = outbox.Backoff{Min: time.Second, Max: time.Millisecond} }), "Backoff"},
		"concurrency":       {valid(func(c *redis.SubscriberConfig) { c.Concurrency = -1 }), "Concurrency"},
		"negative shutdown": {valid(func(c *redis.SubscriberConfig) { c.ShutdownTimeout = -time.Second }), "ShutdownTimeout"},
		"negative idle":     {valid(func(c *redis.SubscriberConfig) { c.ClaimIdle = -time.Second }), "ClaimIdle"},
		"tiny idle":         {valid(func(c *redis.SubscriberConfig) { c.ClaimIdle = time.Millisecond }), "ClaimIdle"},
		"negative poll":     {valid(func(c *redis.SubscriberConfig) { c.PollInterval = -time.Second }), "PollInterval"},
		"negative block":    {valid(func(c *redis.SubscriberConfig) { c.Block = -time.Second }), "Block"},
		"negative op":       {valid(func(c *redis.SubscriberConfig) { c.OpTimeout = -time.Second }), "OpTimeout"},
	} {
		_, err := redis.NewSubscriber(rdb, in, nop, &c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewSubscriber(%+v) = %v, want an error naming %s", name, c.cfg, err, c.want)
		}
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error naming %s", name, err, c.want)
		}
	}
	if _, err := redis.NewSubscriber(rdb, in, nop, nil); err == nil {
		t.Error("NewSubscriber accepted a nil config")
	}
	// The defaults hold together: the default Backoff fits in any ClaimIdle.
	for _, idle := range []time.Duration{0, 10 * time.Millisecond, time.Hour} {
		c := valid(func(c *redis.SubscriberConfig) { c.ClaimIdle = idle })
		if _, err := redis.NewSubscriber(rdb, in, nop, &c); err != nil {
			t.Errorf("ClaimIdle %v and the default Backoff: %v", idle, err)
		}
	}
}

// TestClaimBacklogAtHandlerPace: a backlog of claimable entries (here a
// crashed consumer's) drains as fast as the handlers go, not at
// Concurrency entries per PollInterval: a claim that fills every free slot
// is followed by another as soon as a slot is free.
func TestClaimBacklogAtHandlerPace(t *testing.T) {
	const n = 30
	e := newSubEnv(t, "")
	pool := pgtest.Pool(t)
	db, err := postgres.New(pool, &postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	d := db.Inbox()
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
	cfg := &redis.SubscriberConfig{Streams: []string{e.stream()}, StreamPrefix: e.prefix, Group: group,
		DeadLetterStream: e.deadStream(), ClaimIdle: claimIdle, PollInterval: time.Minute, Block: 50 * time.Millisecond,
		Options: subscribers.Options{Concurrency: 1, Backoff: outbox.Backoff{Min: 10 * time.Millisecond, Max: claimIdle},
			Hooks: subscribers.Hooks{AfterCommit: func(inbox.Message, inbox.Outcome) { handled.Add(1) }}}}
	in, err := inbox.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := redis.NewSubscriber(e.sub, in, func(context.Context, pgx.Tx, inbox.Message) error { return nil }, cfg)
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
	cfg := &redis.SubscriberConfig{Streams: []string{"orders"}, Group: "g", DeadLetterStream: "dead",
		PollInterval: 10 * time.Millisecond, Block: 10 * time.Millisecond, Options: subscribers.Options{Logger: slog.New(logs)}}
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	sub, err := redis.NewSubscriber(rdb, new(inbox.Inbox[pgx.Tx]), nop, cfg)
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
