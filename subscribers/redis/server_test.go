package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/testenv"
)

// adminPassword is the password of a private server's default user.
const adminPassword = "admin-pw"

// privateRedis is a redis-server of one test's own (as in
// publishers/redis's tests), started with
// --requirepass adminPassword on a free port of 127.0.0.1 with its files
// in a temporary directory, killed at cleanup. admin is a client of its
// default user.
type privateRedis struct {
	addr  string
	admin *goredis.Client
}

// url is the server's URL with the given user information ("" for none)
// and database.
func (s *privateRedis) url(userinfo string, db int) string {
	if userinfo != "" {
		userinfo += "@"
	}
	return fmt.Sprintf("redis://%s%s/%d", userinfo, s.addr, db)
}

// startPrivateRedis starts a private server, or ends the test (see
// testenv.Unreachable) where redis-server cannot run.
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unreachable(t, "redis-server on $PATH (for a private server with --requirepass)", err)
	}
	var last error
	for range 5 { // a free port may be taken before the server binds it
		s, err := tryPrivateRedis(t, bin)
		if err == nil {
			return s
		}
		last = err
	}
	t.Fatalf("private redis-server: %v", last)
	return nil
}

func tryPrivateRedis(t testing.TB, bin string) (*privateRedis, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--daemonize", "no", "--save", "", "--appendonly", "no", "--requirepass", adminPassword, "--logfile", "")
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	s := &privateRedis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	s.admin = goredis.NewClient(&goredis.Options{Addr: s.addr, Password: adminPassword, DialTimeout: time.Second, MaxRetries: -1})
	// Waits on the server's progress: it answers, or its process exits.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = s.admin.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exited:
			_ = s.admin.Close()
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("redis-server on port %d exited (%v): %s", port, cmd.ProcessState, log)
		default:
		}
		if time.Now().After(deadline) {
			_ = s.admin.Close()
			stop()
			return nil, fmt.Errorf("redis-server on port %d does not answer after 60s: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		_ = s.admin.Close()
		stop()
	})
	return s, nil
}
