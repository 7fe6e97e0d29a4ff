package logbridge

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestMySQL(t *testing.T) {
	var buf syncBuffer
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
	var buf syncBuffer
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
