package redistest

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ctx bounds one test's calls to its server.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// With AppendOnly, Stop and Start keep the port and every acknowledged
// write; Stop of a stopped server and Start of a running one are errors.
func TestRestartKeepsPortAndData(t *testing.T) {
	s := Start(t, Options{AppendOnly: true})
	c := s.Client()
	if err := c.XAdd(ctx(t), &goredis.XAddArgs{Stream: "orders", Values: []string{"id", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.XGroupCreate(ctx(t), "orders", "g", "0").Err(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err == nil {
		t.Fatal("Stop of a stopped server: no error")
	}
	if err := c.Ping(ctx(t)).Err(); err == nil {
		t.Fatal("the stopped server answers PING")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil {
		t.Fatal("Start of a running server: no error")
	}
	if s.Addr() != addr {
		t.Fatalf("address %s after the restart, was %s", s.Addr(), addr)
	}
	if n, err := c.XLen(ctx(t), "orders").Result(); err != nil || n != 1 {
		t.Fatalf("XLEN after the restart = %d, %v; want 1", n, err)
	}
	groups, err := c.XInfoGroups(ctx(t), "orders").Result()
	if err != nil || len(groups) != 1 || groups[0].Name != "g" {
		t.Fatalf("groups after the restart = %+v, %v; want g", groups, err)
	}
}

// Without AppendOnly nothing survives a restart.
func TestRestartWithoutPersistence(t *testing.T) {
	s := Start(t, Options{})
	if err := s.Client().Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Client().Exists(ctx(t), "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after the restart = %d, %v; want 0", n, err)
	}
}

// RequirePass: a client without the password is refused; URL, Client and
// an ACL user's URLWith get in; Args reach the server.
func TestPasswordUsersAndArgs(t *testing.T) {
	s := Start(t, Options{RequirePass: "pw", Args: []string{"--proto-max-bulk-len", "1048576"}})
	anon := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Ping(ctx(t)).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without the password = %v, want NOAUTH", err)
	}
	if !strings.HasPrefix(s.URL(), "redis://:pw@127.0.0.1:") || !strings.HasSuffix(s.URL(), "/0") {
		t.Fatalf("URL() = %q", s.URL())
	}
	user := s.AddUser(t, "reader", "~*", "+@read", "+ping", "+select")
	for _, u := range []string{s.URL(), s.URLWith(user, 3)} {
		opts, err := goredis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		c := goredis.NewClient(opts)
		err = c.Ping(ctx(t)).Err()
		_ = c.Close()
		if err != nil {
			t.Errorf("PING with %s: %v", u, err)
		}
	}
	got, err := s.Client().ConfigGet(ctx(t), "proto-max-bulk-len").Result()
	if err != nil || got["proto-max-bulk-len"] != "1048576" {
		t.Fatalf("proto-max-bulk-len = %v, %v; want 1048576 (from Args)", got, err)
	}
}

// A server that will not start says why, with its log; a binary that is
// not there skips the test (outside CI).
func TestStartFailures(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("skipping: needs redis-server: %v", err)
	}
	s, err := newServer(t, bin, Options{Args: []string{"--no-such-option", "1"}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start()
	if !errors.Is(err, errExited) || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("Start with a bad option = %v, want an exit with the log's complaint", err)
	}
	var inner *testing.T
	t.Run("missing binary", func(t *testing.T) {
		inner = t
		t.Setenv("CI", "false")
		Start(t, Options{Bin: "/nonexistent/redis-server"})
		t.Error("Start returned without the binary")
	})
	if !inner.Skipped() {
		t.Fatal("Start without the binary did not skip")
	}
}
