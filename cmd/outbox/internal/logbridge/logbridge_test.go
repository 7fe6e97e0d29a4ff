package logbridge

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/redis/go-redis/v9"
)

func TestMySQL(t *testing.T) {
	var buf logtest.Buffer
	MySQL{Logger: slog.New(slog.NewTextHandler(&buf, nil))}.Print("closing bad idle connection: ", "EOF\n")
	got := buf.String()
	if !strings.Contains(got, `level=WARN msg="closing bad idle connection: EOF" component=mysql-driver`) || strings.Count(got, "\n") != 1 {
		t.Fatalf("got %q", got)
	}
	MySQL{}.Print("a nil logger discards")
}

// A failed dial is a line go-redis always logs: it reaches the slog
// logger, not go-redis's own stderr logger.
func TestRedisFailedDial(t *testing.T) {
	var buf logtest.Buffer
	InstallRedis(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { InstallRedis(nil) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	got := buf.String()
	if !strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, `"component":"go-redis"`) || !strings.Contains(got, "failed to dial") {
		t.Fatalf("go-redis's failed dial did not reach the slog logger: %q", got)
	}
	InstallRedis(nil)
	redisLogger{}.Printf(context.Background(), "discarded %d", 1)
}
