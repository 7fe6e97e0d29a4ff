package redis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/redis"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env { return newSubEnv(t, "").env() },
		Outage: func(t *testing.T) subscribertest.Outage {
			opts, err := goredis.ParseURL(redisURL())
			if err != nil {
				t.Fatal(err)
			}
			px := tcpproxy.Start(t, opts.Addr)
			return subscribertest.Outage{Env: newSubEnv(t, px.Addr).env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{Concurrency: true, HeldWhileDelivered: true, CountsDeliveries: true, Redelivers: true},
		Refusals: []subscribertest.Refusal{
			{Name: "wrong password", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				return refusedSub(t, startPrivateRedis(t).url(":wrong-pw", 0), c)
			}},
			{Name: "no password where one is required", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				return refusedSub(t, startPrivateRedis(t).url("", 0), c)
			}},
			{Name: "unknown database", New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				u, err := url.Parse(redisURL())
				if err != nil {
					t.Fatal(err)
				}
				u.Path = "/99" // Redis has 16 databases unless configured otherwise
				return refusedSub(t, u.String(), c)
			}},
		},
	})
}

// refusedSub is a subscriber of c on a client of rawURL (closed at
// cleanup), on streams of its own; Start must fail.
func refusedSub(t *testing.T, rawURL string, c subscribertest.Config) (subscribertest.Subscriber, error) {
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	e := &subEnv{prefix: fmt.Sprintf("outbox-subtest:%d:%d:", os.Getpid(), seq.Add(1))}
	sub, err := redis.NewSubscriber(rdb, c.Inbox, c.Handler, e.config(c))
	if err != nil {
		return nil, err
	}
	return refusedStart{t, sub}, nil
}

// refusedStart checks that the refusal is said as such: Start's error
// wraps ErrRefused.
type refusedStart struct {
	t *testing.T
	subscribertest.Subscriber
}

func (r refusedStart) Start(ctx context.Context) error {
	err := r.Subscriber.Start(ctx)
	if err != nil && !errors.Is(err, redis.ErrRefused) {
		r.t.Errorf("Start: %v: want an error wrapping ErrRefused", err)
	}
	return err
}

// subEnv is a stream and a dead-letter stream under a prefix of the
// test's own; subscribers share a client of their own.
type subEnv struct {
	rdb    *goredis.Client // the test's own
	sub    *goredis.Client // the subscribers'
	prefix string
}

// newSubEnv connects to Redis; the subscribers' client goes to subAddr
// ("": Redis itself).
func newSubEnv(t testing.TB, subAddr string) *subEnv {
	t.Helper()
	opts, err := goredis.ParseURL(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		testenv.Unreachable(t, "Redis at "+redisURL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("outbox-subtest:%d:%d:", os.Getpid(), seq.Add(1))
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
	})
	subOpts := *opts
	if subAddr != "" {
		subOpts.Addr = subAddr
	}
	sub := goredis.NewClient(&subOpts)
	t.Cleanup(func() { _ = sub.Close() }) // after the subscribers' Stop
	return &subEnv{rdb: rdb, sub: sub, prefix: prefix}
}

func (e *subEnv) stream() string     { return e.prefix + "orders" }
func (e *subEnv) deadStream() string { return e.prefix + "dead" }

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.held,
		DeadLetters: e.deadLetters, Source: e.stream(), Orphan: e.orphan}
}

// config is the subscriber config for c: the suite's Options as they
// are, quick to poll, ClaimIdle 2s unless c says.
func (e *subEnv) config(c subscribertest.Config) *redis.SubscriberConfig {
	cfg := &redis.SubscriberConfig{Options: c.Options, Streams: []string{e.stream()}, StreamPrefix: e.prefix,
		Group: c.Group, DeadLetterStream: e.deadStream(), ClaimIdle: 2 * time.Second,
		PollInterval: 5 * time.Millisecond, Block: 50 * time.Millisecond}
	if c.RedeliverAfter != 0 {
		cfg.ClaimIdle = c.RedeliverAfter
	}
	return cfg
}

func (e *subEnv) newSub(_ *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	return redis.NewSubscriber(e.sub, c.Inbox, c.Handler, e.config(c))
}

// publish publishes msgs through the outbox's own Redis publisher.
func (e *subEnv) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := redis.NewPublisher(&redis.PublisherConfig{Client: e.rdb, StreamPrefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	for i, err := range p.Publish(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

func (e *subEnv) publishNoID(t *testing.T, payload string) {
	t.Helper()
	if err := e.rdb.XAdd(context.Background(), &goredis.XAddArgs{Stream: e.stream(), Values: []any{redis.FieldPayload, payload}}).Err(); err != nil {
		t.Fatal(err)
	}
}

// held is what group has not acknowledged: its pending entries and those
// it has not read (its lag); the whole stream before the group exists.
func (e *subEnv) held(t *testing.T, group string) int {
	t.Helper()
	ctx := context.Background()
	n, err := e.rdb.XLen(ctx, e.stream()).Result()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := e.rdb.XInfoGroups(ctx, e.stream()).Result()
	if err != nil && !strings.Contains(err.Error(), "no such key") {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Name == group {
			if g.Lag < 0 {
				t.Fatalf("group %s: lag unknown", group)
			}
			return int(g.Pending + g.Lag)
		}
	}
	return int(n)
}

func (e *subEnv) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		xs, err := e.rdb.XRange(context.Background(), e.deadStream(), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(xs) >= n || !time.Now().Before(deadline) {
			return deadLetters(t, xs)
		}
		<-tick.C
	}
}

func deadLetters(t *testing.T, xs []goredis.XMessage) []subscribertest.DeadLetter {
	var out []subscribertest.DeadLetter
	for _, x := range xs {
		str := func(k string) string { s, _ := x.Values[k].(string); return s }
		var hs map[string]string
		if h := str(redis.FieldHeaders); h != "" {
			if err := json.Unmarshal([]byte(h), &hs); err != nil {
				t.Errorf("dead letter %s: headers %q: %v", x.ID, h, err)
			}
		}
		d, _ := strconv.Atoi(str(redis.FieldDeadDeliveries))
		out = append(out, subscribertest.DeadLetter{ID: str(redis.FieldID), Payload: str(redis.FieldPayload), Headers: hs,
			Error: str(redis.FieldError), Deliveries: d, Source: str(redis.FieldDeadStream), Consumer: str(redis.FieldDeadGroup)})
	}
	return out
}

// orphan reads n entries as a consumer of c.Group that never acknowledges
// them: they stay pending until a subscriber claims them, ClaimIdle
// later.
func (e *subEnv) orphan(t *testing.T, c subscribertest.Config, n int) {
	t.Helper()
	ctx := context.Background()
	if err := e.rdb.XGroupCreateMkStream(ctx, e.stream(), c.Group, "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := e.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: c.Group, Consumer: "dead",
		Streams: []string{e.stream(), ">"}, Count: int64(n), Block: -1}).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		t.Fatal(err)
	}
	if len(res) != 1 || len(res[0].Messages) != n {
		t.Fatalf("the dying consumer read %v, want %d entries", res, n)
	}
}
