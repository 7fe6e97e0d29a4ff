package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/redis"
)

// TestCheckWithoutMulti: a user who may XADD but not MULTI passes Check
// (its probe needs a transaction) and publishes.
func TestCheckWithoutMulti(t *testing.T) {
	s := startPrivateRedis(t)
	p := newPublisher(t, redis.PublisherConfig{URL: s.url(s.addUser(t, "nomulti", "~*", "+@all", "-multi"), 0)})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := p.Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := p.Publish(ctx, []outbox.Message{{ID: outbox.NewID(), Topic: testTopic}})[0]; err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// TestKeyPermissions: key permissions depend on the topics, so Check does
// not judge them; a message for a stream the user may not write fails as
// Misconfigured (not as the message's fault), alone or in a key's run,
// one for a stream it may write is appended, and Check left no entry
// behind.
func TestKeyPermissions(t *testing.T) {
	s := startPrivateRedis(t)
	user := s.url(s.addUser(t, "keys", "~allowed:*", "+@all"), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, prefix := range []string{"other:", "allowed:"} {
		p := newPublisher(t, redis.PublisherConfig{URL: user, StreamPrefix: prefix})
		defer p.Close()
		if err := p.Check(ctx); err != nil {
			t.Fatalf("prefix %q: Check: %v", prefix, err)
		}
		if !p.KeepsKeyOrder() {
			t.Fatalf("prefix %q: KeepsKeyOrder() = false", prefix)
		}
		msgs := []outbox.Message{{ID: outbox.NewID(), Topic: testTopic},
			{ID: outbox.NewID(), Topic: testTopic, Key: "k"}, {ID: outbox.NewID(), Topic: testTopic, Key: "k"}}
		for i, err := range p.Publish(ctx, msgs) {
			switch {
			case prefix == "allowed:" && err != nil:
				t.Errorf("allowed stream, message %d: %v", i, err)
			case prefix == "other:" && (!publishers.IsMisconfigured(err) || publishers.IsPermanent(err) || publishers.IsUnavailable(err)):
				t.Errorf("forbidden stream, message %d: got %v, want an error classified Misconfigured", i, err)
			}
		}
	}
	keys, err := s.admin.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != "allowed:"+testTopic {
		t.Errorf("keys %v, want only allowed:%s (Check appends nothing)", keys, testTopic)
	}
	if n, _ := s.admin.XLen(ctx, "allowed:"+testTopic).Result(); n != 3 {
		t.Errorf("allowed:%s holds %d entries, want 3", testTopic, n)
	}
}

// TestCheckUnreachable: Check of a server that is not there says
// Unavailable, not Misconfigured, and does not print the password.
func TestCheckUnreachable(t *testing.T) {
	s := startPrivateRedis(t)
	addr := s.addr
	s.admin.Shutdown(context.Background()) // the private server only
	p := newPublisher(t, redis.PublisherConfig{URL: "redis://:s3cret@" + addr + "/0?dial_timeout=1s"})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := p.Check(ctx)
	if !publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
		t.Errorf("got %v, want Unavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error prints the password: %v", err)
	}
}

// TestCheckWithClient: with PublisherConfig.Client, Check pings through it.
func TestCheckWithClient(t *testing.T) {
	s := startPrivateRedis(t)
	for _, c := range []struct {
		pw   string
		want func(error) bool
	}{
		{adminPassword, func(err error) bool { return err == nil }},
		{"wrong", publishers.IsMisconfigured},
	} {
		rdb := goredis.NewClient(&goredis.Options{Addr: s.addr, Password: c.pw})
		p := newPublisher(t, redis.PublisherConfig{Client: rdb})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := p.Check(ctx); !c.want(err) {
			t.Errorf("password %q: Check: %v", c.pw, err)
		}
		cancel()
		_ = p.Close()
		_ = rdb.Close()
	}
}
