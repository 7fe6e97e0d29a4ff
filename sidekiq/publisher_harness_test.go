package sidekiq_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/sidekiq"
)

// Constants of the suite's publishers. The namespace of each test
// isolates the tests.
const (
	testMaxPayload = 64 << 10
	testTopic      = "events"
	testClass      = "OutboxTestJob"
	testQueue      = "events"
)

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

// nextNamespace is a namespace no other test uses.
func nextNamespace() string {
	return fmt.Sprintf("outbox-test-sidekiq-%d-%d", os.Getpid(), seq.Add(1))
}

// newNamespace returns a namespace no other test uses; its keys are
// deleted at cleanup.
func newNamespace(t testing.TB, rdb *goredis.Client) string {
	ns := nextNamespace()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys, _ := rdb.Keys(ctx, ns+":*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
	})
	return ns
}

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		rdb := connect(t)
		return pubEnv(rdb, redisURL(), newNamespace(t, rdb))
	},
	Outage: func(t *testing.T) publishertest.Outage {
		rdb := connect(t)
		px := tcpproxy.Start(t, rdb.Options().Addr)
		u := strings.Replace(redisURL(), rdb.Options().Addr, px.Addr, 1)
		return publishertest.Outage{
			Env:   pubEnv(rdb, u, newNamespace(t, rdb)),
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
		{Name: "user without LPUSH", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			s := startPrivateRedis(t)
			s.expectEmpty(t)
			return newFromURL(s.url(s.addUser(t, "nolpush", "~*", "+@all", "-lpush"), 0), env)
		}},
		{Name: "user without the namespace's keys", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			s := startPrivateRedis(t)
			s.expectEmpty(t)
			return newFromURL(s.url(s.addUser(t, "otherkeys", "~other:*", "+@all"), 0), env)
		}},
	},
}

// newFromURL is a refused publisher as the CLI makes it, from a sidekiq://
// URL made of redisURL (with no query), with a namespace of its own and
// env's MaxPayload.
func newFromURL(redisURL string, env publishertest.Env) (publishers.Publisher, error) {
	q := url.Values{"max_payload": {fmt.Sprint(env.MaxPayload)}, "namespace": {nextNamespace()},
		"class": {testClass}, "queue": {testQueue}}
	cfg, err := sidekiq.ConfigFromURL(strings.Replace(redisURL, "redis://", "sidekiq://", 1) + "?" + q.Encode())
	if err != nil {
		return nil, err
	}
	p, err := sidekiq.NewPublisher(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pubEnv is the publisher suite's Env: publishers of pubURL under the
// namespace ns, read back through rdb. Sidekiq keeps no record of the
// jids it was given: no Dedup.
func pubEnv(rdb *goredis.Client, pubURL, ns string) publishertest.Env {
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, sidekiq.PublisherConfig{URL: pubURL, Namespace: ns, Class: testClass,
				Queue: testQueue, MaxPayload: testMaxPayload})
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return received(t, readJobs(t, rdb, ns, testQueue, n, timeout))
		},
		MaxPayload: testMaxPayload,
		Dedup:      false,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg sidekiq.PublisherConfig) *sidekiq.Publisher {
	t.Helper()
	p, err := sidekiq.NewPublisher(&cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

// job is a Sidekiq job as Redis holds it, decoded by a plain JSON reader.
type job struct {
	raw        string
	scheduled  bool
	score      float64           // the schedule set's score
	Class      string            `json:"class"`
	Args       []json.RawMessage `json:"args"`
	Queue      string            `json:"queue"`
	JID        string            `json:"jid"`
	Retry      json.RawMessage   `json:"retry"`
	CreatedAt  *float64          `json:"created_at"`
	EnqueuedAt *float64          `json:"enqueued_at"`
}

// readJobs reads the jobs of queue (oldest first, as Sidekiq's BRPOP
// takes them) and then those of the schedule set (by time) under the
// namespace ns, until there are n or timeout passes.
func readJobs(t testing.TB, rdb *goredis.Client, ns, queue string, n int, timeout time.Duration) []job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := rdb.LRange(ctx, ns+":queue:"+queue, 0, -1).Result()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("LRANGE: %v", err)
		}
		sched, err := rdb.ZRangeWithScores(ctx, ns+":schedule", 0, -1).Result()
		if err != nil && ctx.Err() == nil {
			t.Fatalf("ZRANGE: %v", err)
		}
		if len(list)+len(sched) >= n || ctx.Err() != nil {
			slices.Reverse(list) // LPUSH puts the newest first
			var out []job
			for _, s := range list {
				out = append(out, decodeJob(t, s, false, 0))
			}
			for _, z := range sched {
				out = append(out, decodeJob(t, z.Member.(string), true, z.Score))
			}
			return out
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// decodeJob decodes a job and checks the keys Sidekiq needs.
func decodeJob(t testing.TB, s string, scheduled bool, score float64) job {
	t.Helper()
	j := job{raw: s, scheduled: scheduled, score: score}
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		t.Errorf("job %q: %v", s, err)
		return j
	}
	switch {
	case j.Class == "" || j.Queue == "" || len(j.Retry) == 0 || j.CreatedAt == nil:
		t.Errorf("job %s lacks class, queue, retry or created_at", s)
	case len(j.Args) != 2:
		t.Errorf("job %s: %d args, want 2", s, len(j.Args))
	case len(j.JID) != 24 || strings.Trim(j.JID, "0123456789abcdef") != "":
		t.Errorf("job %s: jid %q is not 24 hex digits", s, j.JID)
	case scheduled != (j.EnqueuedAt == nil):
		t.Errorf("job %s: scheduled %v but enqueued_at %v", s, scheduled, j.EnqueuedAt)
	}
	return j
}

// meta is args[1] of a job.
func (j job) meta(t testing.TB) sidekiq.Meta {
	var m sidekiq.Meta
	if len(j.Args) == 2 {
		if err := json.Unmarshal(j.Args[1], &m); err != nil {
			t.Errorf("job %s: args[1]: %v", j.raw, err)
		}
	}
	return m
}

// payload is the payload args[0] carries, decoded by meta's encoding.
func (j job) payload(t testing.TB) []byte {
	if len(j.Args) != 2 {
		return nil
	}
	switch enc := j.meta(t).Encoding; enc {
	case sidekiq.EncodingJSON:
		return j.Args[0]
	case sidekiq.EncodingBase64:
		var s string
		if err := json.Unmarshal(j.Args[0], &s); err != nil {
			t.Errorf("job %s: args[0]: %v", j.raw, err)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Errorf("job %s: args[0]: %v", j.raw, err)
		}
		return b
	default:
		t.Errorf("job %s: encoding %q", j.raw, enc)
		return nil
	}
}

// received translates jobs for the suite, checking that each jid is the
// one of its event ID.
func received(t testing.TB, jobs []job) []publishertest.Received {
	out := make([]publishertest.Received, len(jobs))
	for i, j := range jobs {
		m := j.meta(t)
		if id, err := uuid.Parse(m.ID); err != nil || sidekiq.JID(id) != j.JID {
			t.Errorf("job %s: jid %q is not the one of its event ID %q", j.raw, j.JID, m.ID)
		}
		out[i] = publishertest.Received{ID: m.ID, Key: m.Key, Type: m.Type, Headers: m.Headers,
			Payload: j.payload(t), Topic: m.Topic}
	}
	return out
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
