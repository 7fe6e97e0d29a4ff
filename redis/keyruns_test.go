package redis_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/redis"
)

// TestKeepsKeyOrder: a publisher of one server keeps key order by default;
// NoKeyRuns, or a cluster client (whose streams may be on several servers),
// turns it off.
func TestKeepsKeyOrder(t *testing.T) {
	rdb := connect(t)
	prefix := newPrefix(t, rdb)
	for _, c := range []struct {
		name string
		cfg  redis.PublisherConfig
		want bool
	}{
		{"default", redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix}, true},
		{"NoKeyRuns", redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix, NoKeyRuns: true}, false},
		{"cluster client", redis.PublisherConfig{StreamPrefix: prefix,
			Client: goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{rdb.Options().Addr}})}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPublisher(t, c.cfg)
			defer p.Close()
			if c.cfg.Client != nil {
				defer c.cfg.Client.Close()
			}
			for range 2 {
				if got := p.KeepsKeyOrder(); got != c.want {
					t.Errorf("KeepsKeyOrder() = %v, want %v", got, c.want)
				}
			}
		})
	}
}

// TestKeyRunStopsAtFailure: when Redis refuses a message of a key's run
// (WRONGTYPE: its stream key holds a string), the key's earlier messages
// are appended, its later ones are not and fail as NotSent only, and
// another key's run and a lone keyed message go through.
func TestKeyRunStopsAtFailure(t *testing.T) {
	rdb := connect(t)
	prefix := newPrefix(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, prefix+"string", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, redis.PublisherConfig{URL: redisURL(), StreamPrefix: prefix})
	defer p.Close()
	if !p.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder() = false on the shared Redis")
	}
	msg := func(key, topic string) outbox.Message {
		return outbox.Message{ID: outbox.NewID(), Topic: topic, Key: key, Payload: []byte(key)}
	}
	k := []outbox.Message{msg("k", testTopic), msg("k", "string"), msg("k", testTopic), msg("k", testTopic)}
	j := []outbox.Message{msg("j", testTopic), msg("j", testTopic), msg("j", testTopic)}
	lone := msg("lone", testTopic)
	msgs := []outbox.Message{k[0], j[0], k[1], lone, j[1], k[2], j[2], k[3]}
	errs := p.Publish(ctx, msgs)
	for i, err := range errs {
		m := msgs[i]
		switch {
		case m.ID == k[1].ID:
			if err == nil || publishers.IsNotSent(err) || !strings.Contains(err.Error(), "WRONGTYPE") {
				t.Errorf("the message to a string key: got %v, want Redis's WRONGTYPE", err)
			}
		case m.ID == k[2].ID || m.ID == k[3].ID:
			if !publishers.IsNotSent(err) || publishers.IsPermanent(err) || publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
				t.Errorf("message %d, after the failed one of its key: got %v, want an error classified NotSent only", i, err)
			}
		case err != nil:
			t.Errorf("message %d (key %s): %v", i, m.Key, err)
		}
	}
	got := read(t, rdb, prefix+testTopic, 5, 15*time.Second)
	perKey := map[string][]string{}
	for _, r := range got {
		perKey[r.Key] = append(perKey[r.Key], r.ID)
	}
	for key, want := range map[string][]outbox.Message{"k": k[:1], "j": j, "lone": {lone}} {
		if !slices.Equal(perKey[key], ids(want)) {
			t.Errorf("key %s: read %v, want %v", key, perKey[key], ids(want))
		}
	}
	if len(got) != 5 {
		t.Errorf("read %d entries, want 5", len(got))
	}
}

// TestKeyRunsWithoutEval: a user who may not run scripts gets a publisher
// that says it does not keep key order, says why in its log, and publishes
// a key's messages one XADD each.
func TestKeyRunsWithoutEval(t *testing.T) {
	s := startPrivateRedis(t)
	var log logtest.Buffer
	p := newPublisher(t, redis.PublisherConfig{URL: s.url(s.addUser(t, "noeval", "~*", "+@all", "-@scripting"), 0),
		Logger: log.Logger()})
	defer p.Close()
	if p.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder() = true for a user without EVAL")
	}
	if !strings.Contains(log.String(), "may not run EVAL") {
		t.Errorf("log %q does not say why", log.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: testTopic, Key: "k", Payload: []byte("1")},
		{ID: outbox.NewID(), Topic: testTopic, Key: "k", Payload: []byte("2")},
	}
	for i, err := range p.Publish(ctx, msgs) {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	n, err := s.admin.XLen(ctx, testTopic).Result()
	if err != nil || n != 2 {
		t.Errorf("XLEN = %d, %v; want 2", n, err)
	}
}

// ids returns the IDs of msgs as strings.
func ids(msgs []outbox.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID.String()
	}
	return out
}
