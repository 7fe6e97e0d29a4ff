package natstest

import (
	"net"
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

// StartServer starts a nats-server with JetStream on a free port of
// 127.0.0.1, storing under dir (t.TempDir() when empty), and shuts it down
// at cleanup. Each of opts may change the server's options before the first
// start (e.g. turn JetStream off).
func StartServer(t testing.TB, dir string, opts ...func(*server.Options)) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s := &Server{t: t, opts: server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}}
	for _, o := range opts {
		o(&s.opts)
	}
	s.Start()
	// Later starts reuse the port the first one was given.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	s.url = s.srv.ClientURL()
	t.Cleanup(s.Shutdown)
	return s
}

// URL is the client URL; it stays the same across restarts.
func (s *Server) URL() string { return s.url }

// Start starts the server when it is down (StartServer has started it
// already) and returns once it accepts connections.
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
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		s.t.Fatalf("nats-server on port %d not ready within 10s", opts.Port)
	}
	s.srv = srv
}

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

// Restart is Shutdown followed by Start.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.Start()
}

// Connect connects to the server, reconnecting forever every 50ms across
// restarts, and closes the connection at cleanup.
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.url, nats.Name("natstest"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to private nats-server %s: %v", s.url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
