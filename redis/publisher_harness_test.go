package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/redis"
)

// testMaxPayload is the publishers' MaxPayload in the tests.
const testMaxPayload = 64 << 10

// testTopic is the topic of the suite; the stream prefix of each test
// isolates the tests.
const testTopic = "events"

// connect returns a client of the shared Redis, closed at cleanup, or ends
// the test.
func connect(t testing.TB) *goredis.Client {
	t.Helper()
	opts, err := goredis.ParseURL(redisURL())
	if err != nil {
		t.Fatalf("OUTBOX_TEST_REDIS_URL: %v", err)
	}
	rdb := goredis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		testenv.Unreachable(t, "Redis at "+redisURL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newPrefix returns a stream prefix no other test uses; the streams under
// it are deleted at cleanup.
func newPrefix(t testing.TB, rdb *goredis.Client) string {
	prefix := fmt.Sprintf("outbox-test:%d:%d:", os.Getpid(), seq.Add(1))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, _ := rdb.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
	})
	return prefix
}

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		rdb := connect(t)
		return pubEnv(rdb, redisURL(), newPrefix(t, rdb))
	},
	Outage: func(t *testing.T) publishertest.Outage {
		rdb := connect(t)
		px := tcpproxy.Start(t, rdb.Options().Addr)
		u := strings.Replace(redisURL(), rdb.Options().Addr, px.Addr, 1)
		return publishertest.Outage{
			Env:   pubEnv(rdb, u, newPrefix(t, rdb)),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	Refusals: []publishertest.Refusal{
		{Name: "wrong password", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			s := startPrivateRedis(t)
			s.expectEmpty(t)
			return newFromURL(s.url(":wrong-pw", 0), env)
		}},
		{Name: "no password where one is required", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			s := startPrivateRedis(t)
			s.expectEmpty(t)
			return newFromURL(s.url("", 0), env)
		}},
		{Name: "unknown database", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			connect(t) // the shared Redis is there
			u, err := url.Parse(redisURL())
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/99" // Redis has 16 databases unless configured otherwise
			return newFromURL(u.String(), env)
		}},
		{Name: "user without XADD", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			s := startPrivateRedis(t)
			s.expectEmpty(t)
			return newFromURL(s.url(s.addUser(t, "noxadd", "~*", "+@all", "-xadd"), 0), env)
		}},
	},
}

// newFromURL is a refused publisher as the CLI makes it, from a URL (with
// no query), with a stream prefix of its own and env's MaxPayload.
func newFromURL(rawURL string, env publishertest.Env) (publishers.Publisher, error) {
	q := url.Values{"max_payload": {fmt.Sprint(env.MaxPayload)},
		"stream_prefix": {fmt.Sprintf("outbox-test:%d:%d:", os.Getpid(), seq.Add(1))}}
	cfg, err := redis.ConfigFromURL(rawURL + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	p, err := redis.NewPublisher(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pubEnv is the publisher suite's Env: publishers of pubURL under
// prefix, read back through rdb. Redis keeps no record of the entry IDs
// it was given: no Dedup.
func pubEnv(rdb *goredis.Client, pubURL, prefix string) publishertest.Env {
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, redis.PublisherConfig{URL: pubURL, StreamPrefix: prefix, MaxPayload: testMaxPayload})
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return read(t, rdb, prefix+testTopic, n, timeout)
		},
		MaxPayload: testMaxPayload,
		Dedup:      false,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg redis.PublisherConfig) *redis.Publisher {
	t.Helper()
	p, err := redis.NewPublisher(&cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

// read reads the whole stream with XRANGE until it has n entries or
// timeout passes, waiting for new entries with XREAD BLOCK.
func read(t *testing.T, rdb *goredis.Client, stream string, n int, timeout time.Duration) []publishertest.Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		entries, err := rdb.XRange(ctx, stream, "-", "+").Result()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("XRANGE %s: %v", stream, err)
		}
		if len(entries) >= n || ctx.Err() != nil {
			return received(t, entries)
		}
		last := "0-0"
		if len(entries) > 0 {
			last = entries[len(entries)-1].ID
		}
		// Wait for something newer than what was read, at most 1s at a time.
		_ = rdb.XRead(ctx, &goredis.XReadArgs{Streams: []string{stream, last}, Count: 1, Block: time.Second}).Err()
	}
}

func received(t *testing.T, entries []goredis.XMessage) []publishertest.Received {
	out := make([]publishertest.Received, len(entries))
	for i, e := range entries {
		str := func(f string) string { s, _ := e.Values[f].(string); return s }
		var h map[string]string
		if err := json.Unmarshal([]byte(str(redis.FieldHeaders)), &h); err != nil {
			t.Errorf("entry %s: headers %q: %v", e.ID, str(redis.FieldHeaders), err)
		}
		out[i] = publishertest.Received{
			ID:      str(redis.FieldID),
			Key:     str(redis.FieldKey),
			Type:    str(redis.FieldType),
			Headers: h,
			Payload: []byte(str(redis.FieldPayload)),
		}
	}
	return out
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
