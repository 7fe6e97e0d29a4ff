package redis_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/redis"
)

// TestOpenBroker: the redis scheme opens a Publisher configured by the
// URL's parameters, which checks and publishes to the stream the prefix
// names.
func TestOpenBroker(t *testing.T) {
	rdb := connect(t)
	prefix := newPrefix(t, rdb)
	u, err := url.Parse(redisURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("stream_prefix", prefix)
	q.Set("maxlen", "100")
	q.Set("dial_timeout", "2s") // go-redis's own
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, err := backend.OpenBroker(ctx, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	if _, ok := p.(*redis.Publisher); !ok {
		t.Fatalf("OpenBroker returned a %T", p)
	}
	if err := p.(publishers.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	msg := outbox.Message{ID: outbox.NewID(), Topic: testTopic, Key: "k", Payload: []byte("hello")}
	if err := p.Publish(ctx, []outbox.Message{msg})[0]; err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got := read(t, rdb, prefix+testTopic, 1, 15*time.Second)
	if len(got) != 1 || got[0].ID != msg.ID.String() || string(got[0].Payload) != "hello" {
		t.Errorf("stream %s%s holds %+v", prefix, testTopic, got)
	}
}

// TestOpenBrokerLogs: the publisher logs to BrokerOptions.Logger (here:
// a user without MULTI, whose XADD permission Check cannot probe).
func TestOpenBrokerLogs(t *testing.T) {
	s := startPrivateRedis(t)
	logs := &recordHandler{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p, err := backend.OpenBroker(ctx, s.url(s.addUser(t, "nomulti", "~*", "+@all", "-multi"), 0), &backend.BrokerOptions{Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	if err := p.(publishers.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !logs.has(slog.LevelInfo, "MULTI") {
		t.Errorf("nothing logged about the skipped probe; logs: %v", logs.all())
	}
	for _, l := range logs.all() {
		if strings.Contains(l, "nomulti-pw") {
			t.Errorf("a log line prints the password: %s", l)
		}
	}
}

// TestOpenBrokerRefusesBadParams: a bad or unknown URL parameter is one
// error, naming it, that never prints the password; so is a bad URL.
func TestOpenBrokerRefusesBadParams(t *testing.T) {
	ctx := context.Background()
	for rawURL, want := range map[string]string{
		"redis://bob:s3cret@127.0.0.1:6379/0?nope=1":             `unknown parameter "nope"`,
		"redis://bob:s3cret@127.0.0.1:6379/0?maxlen=many":        "maxlen",
		"redis://bob:s3cret@127.0.0.1:6379/0?max_payload=-1":     "max_payload",
		"redis://bob:s3cret@127.0.0.1:6379/0?read_timeout=later": "read_timeout",
		"rediss://bob:s3cret@127.0.0.1:6379/x":                   "database",
	} {
		p, err := backend.OpenBroker(ctx, rawURL, nil)
		if err == nil {
			_ = p.Close()
			t.Errorf("%s: opened", rawURL)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, want) || strings.Contains(msg, "s3cret") || strings.Count(msg, "\n") > 0 {
			t.Errorf("%s: got %q, want one line naming %s without the password", rawURL, msg, want)
		}
	}
}

// TestRegistered: both schemes are Redis's, and every parameter listed is
// one ConfigFromURL takes.
func TestRegistered(t *testing.T) {
	for _, s := range []string{"redis://h", "rediss://h"} {
		b, err := backend.LookupBroker(s)
		if err != nil || b.Name != "Redis" {
			t.Fatalf("%s: %v, %v", s, b.Name, err)
		}
	}
	b, _ := backend.LookupBroker("redis://h")
	for _, p := range b.Params {
		v := p.Default
		if v == "" || v == "read_timeout" { // no default, or another's
			v = "1s"
		}
		if _, err := redis.ConfigFromURL("redis://h/0?" + url.Values{p.Name: {v}}.Encode()); err != nil {
			t.Errorf("parameter %s=%s: %v", p.Name, v, err)
		}
	}
}
