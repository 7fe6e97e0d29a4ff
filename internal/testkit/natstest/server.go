package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Server is a private in-process nats-server with JetStream that a test may
// stop and start again on the same port and store directory, to play a
// broker outage without touching the shared server.
type Server struct {
	t    testing.TB
	mu   sync.Mutex
	opts server.Options
	srv  *server.Server // nil while down
	url  string
}

// private holds the addresses (host:port) of the private Servers:
// NewStream leaves their streams to the server's own cleanup.
var private sync.Map // host:port → struct{}

// readyWithin bounds how long a private server may take to accept
// connections. A start that fails (the port is taken, the store is
// unusable) fails at once; this only catches a server that hangs.
const readyWithin = 2 * time.Minute

// StartServer starts a nats-server with JetStream on a free port of
// 127.0.0.1, storing under dir (t.TempDir() when empty), and shuts it down
// at cleanup. Each of opts may change the server's options before the first
// start (e.g. turn JetStream off).
func StartServer(t testing.TB, dir string, opts ...func(*server.Options)) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	o := server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
	}
	for _, f := range opts {
		f(&o)
	}
	return startWith(t, o)
}

// StartServerConfig starts a private server, like StartServer, from a
// nats-server configuration (accounts, users, permissions…); the store
// directory and the free port of 127.0.0.1 are set by StartServerConfig.
func StartServerConfig(t testing.TB, config string) *Server {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats-server config: %v", err)
	}
	o.ServerName, o.Host, o.Port = "natstest", "127.0.0.1", server.RANDOM_PORT
	o.JetStream, o.StoreDir = true, filepath.Join(dir, "store")
	return startWith(t, *o)
}

func startWith(t testing.TB, o server.Options) *Server {
	t.Helper()
	o.NoLog, o.NoSigs = true, true
	s := &Server{t: t, opts: o}
	s.Start()
	// Later starts reuse the port the first one was given.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	s.url = s.srv.ClientURL()
	addr := s.srv.Addr().String()
	private.Store(addr, struct{}{})
	t.Cleanup(func() {
		s.Shutdown()
		private.Delete(addr)
	})
	return s
}

// URL is the client URL, without credentials; it stays the same across
// restarts.
func (s *Server) URL() string { return s.url }

// Start starts the server when it is down (StartServer has started it
// already) and returns once it accepts connections. A server that fails to
// start (its port taken meanwhile) fails the test at once.
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats-server: %v", err)
	}
	fatal := make(chan string, 1)
	srv.SetLoggerV2(fatalLogger{fatal}, false, false, false)
	srv.Start()
	deadline := time.Now().Add(readyWithin)
	for !srv.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-fatal:
			srv.Shutdown()
			srv.WaitForShutdown()
			s.t.Fatalf("nats-server on port %d: %s", opts.Port, msg)
		default:
		}
		if time.Now().After(deadline) {
			srv.Shutdown()
			srv.WaitForShutdown()
			s.t.Fatalf("nats-server on port %d not ready within %v", opts.Port, readyWithin)
		}
	}
	s.srv = srv
}

// fatalLogger passes on the server's fatal errors (a port it cannot
// listen on) and drops the rest.
type fatalLogger struct{ fatal chan<- string }

func (l fatalLogger) Fatalf(format string, v ...any) {
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
func (fatalLogger) Noticef(string, ...any) {}
func (fatalLogger) Warnf(string, ...any)   {}
func (fatalLogger) Errorf(string, ...any)  {}
func (fatalLogger) Debugf(string, ...any)  {}
func (fatalLogger) Tracef(string, ...any)  {}

// Shutdown stops the server and returns once it is down. Clients see the
// connection drop.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Reconfigure changes the options the server starts with next (a token
// rotated, say); call Restart to apply them.
func (s *Server) Reconfigure(f func(*server.Options)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.opts)
}

// Restart is Shutdown followed by Start.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.Start()
}

// Connect connects to the server with opts (credentials, say),
// reconnecting forever every 50ms across restarts, and closes the
// connection at cleanup. Asynchronous errors are dropped unless opts set
// a handler.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Name("natstest"), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)
	nc, err := nats.Connect(s.url, opts...)
	if err != nil {
		t.Fatalf("connect to private nats-server %s: %v", s.url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
