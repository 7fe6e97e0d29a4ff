package redistest

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/testenv"
)

// Options configure a private server. The zero value is a server with no
// password and no persistence.
type Options struct {
	// RequirePass is the default user's password (--requirepass); URL and
	// Client use it. Default "": none.
	RequirePass string
	// AppendOnly keeps the data in an append-only file in the server's
	// directory (appendonly yes, appendfsync everysec, no RDB snapshots),
	// so that Stop and Start lose nothing the server acknowledged: Redis
	// writes each write command to the file before it answers it, and a
	// clean shutdown fsyncs what is left; every key, consumer group,
	// last-delivered ID and pending entry comes back. (A crash of the
	// machine could lose about a second of acknowledged writes, a SIGKILL
	// of the server what a slow fsync held back; Stop does neither.)
	// Default false: no persistence (--appendonly no, --save ""), and
	// Start after Stop begins empty.
	AppendOnly bool
	// Args are more redis-server arguments, after the package's own (a
	// later one wins): e.g. "--proto-max-bulk-len", "1048576".
	Args []string
	// Bin is the redis-server binary. Default: redis-server on $PATH.
	Bin string
}

// The waits of a Server: on progress, not on wall time.
const (
	// stallLimit is how long a server starting or stopping may show no
	// progress (no new line in its log, no LOADING reply) before it is
	// taken for hung.
	stallLimit = 60 * time.Second
	// tries is how many ports Start tries: a free port may be taken before
	// the server binds it.
	tries = 5
	// pollEvery spaces the looks at a starting server.
	pollEvery = 20 * time.Millisecond
)

// Server is a private redis-server.
type Server struct {
	bin      string
	args     []string // all but --port
	dir      string
	port     int
	addr     string
	password string
	client   *goredis.Client

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil while stopped
	exited chan struct{} // closed when cmd has exited
}

// Start starts a private server and waits until it answers PING. It ends
// the test: skipped (failed under CI=true) where the binary is not there,
// failed where the server will not start. The server is killed at cleanup.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := exec.LookPath(cmp.Or(o.Bin, "redis-server"))
	if err != nil {
		where := "on $PATH"
		if o.Bin != "" {
			where = "at " + o.Bin
		}
		testenv.Unreachable(t, "redis-server "+where+" (for a private Redis server)", err)
		return nil
	}
	var last error
	for range tries {
		s, err := newServer(t, bin, o)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		last = s.Start()
		if last == nil {
			s.client = goredis.NewClient(&goredis.Options{Addr: s.addr, Password: s.password, DialTimeout: time.Second, MaxRetries: -1})
			t.Cleanup(func() { _ = s.client.Close() }) // before the kill: cleanups run last first
			return s
		}
		if !errors.Is(last, errExited) {
			break // hung, not beaten to the port: another try would hang too
		}
	}
	t.Fatalf("redistest: no private redis-server would start: %v", last)
	return nil
}

// newServer picks a free port and a directory, and registers the kill
// at cleanup.
func newServer(t testing.TB, bin string, o Options) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	args := []string{"--bind", "127.0.0.1", "--dir", dir, "--daemonize", "no", "--logfile", "", "--save", ""}
	if o.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "everysec")
	} else {
		args = append(args, "--appendonly", "no")
	}
	if o.RequirePass != "" {
		args = append(args, "--requirepass", o.RequirePass)
	}
	s := &Server{bin: bin, args: append(args, o.Args...), dir: dir, port: port,
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), password: o.RequirePass}
	t.Cleanup(s.kill) // before t.TempDir's removal: cleanups run last first
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is the default user's URL of database 0: with RequirePass,
// redis://:PASSWORD@ADDR/0.
func (s *Server) URL() string {
	var u *url.Userinfo
	if s.password != "" {
		u = url.UserPassword("", s.password)
	}
	return s.URLWith(u, 0)
}

// URLWith is the server's URL with user (nil for none) and database db.
func (s *Server) URLWith(user *url.Userinfo, db int) string {
	return (&url.URL{Scheme: "redis", User: user, Host: s.addr, Path: "/" + strconv.Itoa(db)}).String()
}

// Client is a client of the default user (no retries, 1 s dial timeout),
// closed at cleanup. It reconnects by itself after Stop and Start.
func (s *Server) Client() *goredis.Client { return s.client }

// Start runs the server (again, after Stop: on the same port and
// directory, with the same arguments) and waits until it answers PING,
// after loading its append-only file. It fails when the server is running
// already, exits, or shows no progress for a minute (it is killed then).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redis-server is running already")
	}
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, append([]string{"--port", strconv.Itoa(s.port)}, s.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	if err := s.awaitReady(); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		s.cmd = nil
		return err
	}
	return nil
}

// Stop shuts the server down cleanly (SIGTERM, which Redis takes as
// SHUTDOWN: with AppendOnly the file is written and fsynced) and waits for
// it to exit, so that Start can take the port again. It fails when the
// server is not running, exits with an error, or shows no progress for a
// minute after SIGTERM (it is killed then).
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redis-server is not running")
	}
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for p := s.progress(); ; {
		select {
		case <-exited:
			if st := cmd.ProcessState; !st.Success() {
				return fmt.Errorf("redis-server on port %d: shutdown %v; its log:\n%s", s.port, st, s.logTail())
			}
			return nil
		case <-tick.C:
		}
		if !p.moved(false) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on port %d shows no progress for %v after SIGTERM (killed); its log:\n%s", s.port, stallLimit, s.logTail())
		}
	}
}

// kill SIGKILLs the server, if running, and waits for it (cleanup).
func (s *Server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.cmd = nil
	}
}
