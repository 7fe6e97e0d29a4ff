package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/redis"
)

// TestWrongTypeFailsAlone: a stream key holding another type fails that
// message alone, unmarked; the rest of the pipeline is appended.
func TestWrongTypeFailsAlone(t *testing.T) {
	rdb := connect(t)
	prefix := newPrefix(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, prefix+"string", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix})
	defer p.Close()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("a")},
		{ID: outbox.NewID(), Topic: "string", Payload: []byte("b")},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("c")},
	}
	errs := p.Publish(ctx, msgs)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("routable messages: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || publishers.IsUnavailable(errs[1]) || publishers.IsPermanent(errs[1]) {
		t.Errorf("WRONGTYPE: got %v, want an unmarked error", errs[1])
	}
	got := read(t, rdb, prefix+testTopic, 2, 15*time.Second)
	if len(got) != 2 || got[0].ID != msgs[0].ID.String() || got[1].ID != msgs[2].ID.String() {
		t.Errorf("read %+v", got)
	}
}

// TestMaxLen: with MaxLen the stream is trimmed to about MaxLen entries,
// by lone XADDs and by a key's runs alike.
func TestMaxLen(t *testing.T) {
	rdb := connect(t)
	for _, key := range []string{"", "k"} {
		prefix := newPrefix(t, rdb)
		p := newPublisher(t, redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix, MaxLen: 10})
		defer p.Close()
		if !p.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder() = false on the shared Redis")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		for range 5 {
			msgs := make([]outbox.Message, 500)
			for i := range msgs {
				msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: testTopic, Key: key, Payload: []byte("x")}
			}
			for i, err := range p.Publish(ctx, msgs) {
				if err != nil {
					t.Fatalf("key %q, message %d: %v", key, i, err)
				}
			}
		}
		n, err := rdb.XLen(ctx, prefix+testTopic).Result()
		if err != nil {
			t.Fatal(err)
		}
		// MAXLEN ~ trims whole macro nodes (100 entries by default).
		if n >= 2500 || n < 10 {
			t.Errorf("key %q: stream holds %d entries, want about 10 (at most a few hundred)", key, n)
		}
	}
}

func TestConfigFromURL(t *testing.T) {
	cfg, err := redis.ConfigFromURL("redis://bob:s3cret@h:6379/2?stream_prefix=app:&maxlen=1000&max_payload=4096&key_runs=false&dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StreamPrefix != "app:" || cfg.MaxLen != 1000 || cfg.MaxPayload != 4096 || !cfg.NoKeyRuns {
		t.Errorf("cfg %+v", cfg)
	}
	if cfg.URL != "redis://bob:s3cret@h:6379/2?dial_timeout=2s" {
		t.Errorf("URL %q", cfg.URL)
	}
	for _, bad := range []string{"amqp://h", "redis://bob:s3cret@h/0?maxlen=x", "redis://bob:s3cret@h/0?nope=1"} {
		_, err := redis.ConfigFromURL(bad)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// Each bad parameter is named, whose ever it is.
	for bad, name := range map[string]string{
		"redis://bob:s3cret@h/0?nope=1":                 `"nope"`,
		"redis://bob:s3cret@h/0?maxlen=-1":              "maxlen",
		"redis://bob:s3cret@h/0?max_payload=-5":         "max_payload",
		"redis://bob:s3cret@h/0?max_payload=1k":         "max_payload",
		"redis://bob:s3cret@h/0?key_runs=sometimes":     "key_runs",
		"redis://bob:s3cret@h/0?dial_timeout=soon":      "dial_timeout",
		"rediss://bob:s3cret@h/0?stream_prefix=a&b=2&c": `"b", "c"`,
	} {
		_, err := redis.ConfigFromURL(bad)
		if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: got %v, want an error naming %s without the password", bad, err, name)
		}
	}
}

// TestPublisherConfigChecks: NewPublisher refuses negative settings,
// naming the field, and takes nil for every default.
func TestPublisherConfigChecks(t *testing.T) {
	for name, c := range map[string]redis.PublisherConfig{
		"MaxLen":     {MaxLen: -1},
		"MaxPayload": {MaxPayload: -1},
	} {
		if p, err := redis.NewPublisher(&c); err == nil || !strings.Contains(err.Error(), name) {
			if p != nil {
				_ = p.Close()
			}
			t.Errorf("%+v: NewPublisher = %v, want an error naming %s", c, err, name)
		}
	}
	p, err := redis.NewPublisher(nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
}

// TestLargeHeadersPermanent: headers whose JSON is over MaxPayload fail that
// message alone, as permanent, without being sent; the rest of the
// pipeline is appended. Sent, a headers field over the server's
// proto-max-bulk-len would make Redis close the connection, failing the
// whole pipeline as an outage at every retry.
func TestLargeHeadersPermanent(t *testing.T) {
	rdb := connect(t)
	prefix := newPrefix(t, rdb)
	p := newPublisher(t, redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix, MaxPayload: testMaxPayload})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("a")},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("b"),
			Headers: map[string]string{"big": strings.Repeat("h", testMaxPayload)}},
		{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("c")},
	}
	errs := p.Publish(ctx, msgs)
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("small messages: %v, %v", errs[0], errs[2])
	}
	if !publishers.IsPermanent(errs[1]) || !errors.Is(errs[1], redis.ErrTooLarge) || !strings.Contains(errs[1].Error(), "headers") {
		t.Errorf("headers over MaxPayload: got %v, want a permanent ErrTooLarge about the headers", errs[1])
	}
	got := read(t, rdb, prefix+testTopic, 2, 15*time.Second)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] != msgs[0].ID.String() || ids[1] != msgs[2].ID.String() {
		t.Errorf("the stream holds %v, want %v and %v", ids, msgs[0].ID, msgs[2].ID)
	}
}

// TestPublishHonorsDeadline: with the way to Redis stalled, Publish returns
// by its context's deadline (unavailable), not after go-redis's 5 s
// ReadTimeout.
func TestPublishHonorsDeadline(t *testing.T) {
	rdb := connect(t)
	px := tcpproxy.Start(t, rdb.Options().Addr)
	u := strings.Replace(redisURL(), rdb.Options().Addr, px.Addr, 1)
	p := newPublisher(t, redis.PublisherConfig{URL: u, StreamPrefix: newPrefix(t, rdb)})
	defer p.Close()
	publish := func(timeout time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		errs := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("x")}})
		return time.Since(start), errs[0]
	}
	if _, err := publish(5 * time.Second); err != nil { // connected
		t.Fatal(err)
	}
	px.Stall(true)
	defer px.Stall(false)
	took, err := publish(300 * time.Millisecond)
	if !publishers.IsUnavailable(err) {
		t.Errorf("stalled: got %v, want unavailable", err)
	}
	if took > 2*time.Second {
		t.Errorf("stalled: Publish took %v with a 300ms deadline", took)
	}
}
