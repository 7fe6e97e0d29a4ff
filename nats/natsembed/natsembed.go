// Package natsembed runs a NATS server with JetStream inside the process:
// the broker of `outbox demo`, so that they need nothing
// installed but Go. It can be shut down and restarted on the same port and
// store directory, to play a broker outage.
//
// It is internal on purpose: an in-process broker is a demo's and a test's
// convenience, not something a service should ship. In your own code,
// connect the nats package's publisher and subscriber to a real NATS
// server.
package natsembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config configures an embedded server.
type Config struct {
	// DataDir is where JetStream stores streams and consumers; a restart
	// finds them there. Required.
	DataDir string
	// Host is the interface to listen on. Default "127.0.0.1".
	Host string
	// Port is the client port; 0 picks a free one (kept across restarts).
	Port int
	// Logger receives the server's log lines — its banner and notices at
	// Debug, its warnings at Warn, its errors at Error — and one Info line
	// when it is ready (give it a component attribute: the lines carry
	// none of their own). Default: none.
	Logger *slog.Logger
}

// Server is an in-process nats-server with JetStream. It is safe for
// concurrent use.
type Server struct {
	mu   sync.Mutex
	opts server.Options
	log  *slog.Logger
	srv  *server.Server // nil while down
	url  string
}

// Start starts a server and returns once it accepts connections. A port
// that is taken fails it at once, naming the port; so does any error the
// server reports while starting. It fails when ctx ends first; without a
// deadline on ctx it gives a server that hangs a minute.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("natsembed: DataDir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	port := cfg.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, opts: server.Options{
		ServerName: "outbox-embedded",
		Host:       cfg.Host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.DataDir,
		NoSigs:     true,
	}}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	// Restarts reuse the port the first start was given.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	s.url = s.srv.ClientURL()
	return s, nil
}

// URL is the client URL (nats://host:port); it stays the same across
// restarts.
func (s *Server) URL() string { return s.url }

// Running reports whether the server is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv != nil
}

// Shutdown stops the server and returns once it is down and its goroutines
// have returned. Clients see their connections drop. It is a no-op when the
// server is down.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	settle(s.srv)
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// settleWithin bounds how long Shutdown lets JetStream API requests in
// flight finish.
const settleWithin = 5 * time.Second

// settle returns once the server has answered the JetStream API requests it
// received, or after settleWithin. A stream the server creates while it
// shuts down is never stopped (nats-server 2.15: its store's goroutines
// outlive the server and its files are not flushed): a relay interrupted
// while it sets its stream up would leave one behind.
func settle(srv *server.Server) {
	deadline := time.Now().Add(settleWithin)
	for time.Now().Before(deadline) {
		jsi, err := srv.Jsz(&server.JSzOptions{})
		if err != nil || jsi.Disabled || jsi.API.Inflight == 0 {
			return
		}
		time.Sleep(time.Millisecond) // polling the server's own counter
	}
}

// Restart starts the server again on the same port and store directory,
// shutting it down first if it is up, and returns once it accepts
// connections. Streams, consumers and stored messages survive.
func (s *Server) Restart(ctx context.Context) error {
	s.Shutdown()
	return s.start(ctx)
}

// readyWithin bounds the wait for a server that neither gets ready nor
// fails, when ctx has no deadline.
const readyWithin = time.Minute

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	opts := s.opts
	addr := net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("natsembed: start on %s: %w", addr, err)
	}
	if opts.Port != server.RANDOM_PORT {
		// The server would log the failure and wait; find it first.
		l, err := new(net.ListenConfig).Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("natsembed: cannot listen on port %d (%s): %w", opts.Port, addr, err)
		}
		_ = l.Close()
	}
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("natsembed: %w", err)
	}
	fatal := make(chan string, 1)
	srv.SetLoggerV2(logger{l: s.log, fatal: fatal}, false, false, false)
	srv.Start()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(readyWithin)
	}
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		var why error
		select {
		case msg := <-fatal:
			why = fmt.Errorf("natsembed: server on %s: %s", addr, msg)
		case <-ctx.Done():
			why = fmt.Errorf("natsembed: start on %s: %w", addr, ctx.Err())
		default:
			if time.Now().After(deadline) {
				why = fmt.Errorf("natsembed: server on %s not ready within %v", addr, readyWithin)
			}
		}
		if why != nil {
			srv.Shutdown()
			srv.WaitForShutdown()
			return why
		}
	}
	s.srv = srv
	s.log.Info("embedded NATS server ready", "url", srv.ClientURL(), "version", server.VERSION, "store", opts.StoreDir)
	return nil
}

// logger adapts slog to the server's Logger: the banner and notices at
// Debug (a default log shows one line of ours, not the server's thirty),
// warnings at Warn, errors at Error. A fatal error (a port it cannot
// listen on) also goes to fatal, for start to fail at once.
type logger struct {
	l     *slog.Logger
	fatal chan<- string
}

func (g logger) Noticef(format string, v ...any) { g.l.Debug(fmt.Sprintf(format, v...)) }
func (g logger) Warnf(format string, v ...any)   { g.l.Warn(fmt.Sprintf(format, v...)) }
func (g logger) Errorf(format string, v ...any)  { g.l.Error(fmt.Sprintf(format, v...)) }
func (g logger) Debugf(format string, v ...any)  { g.l.Debug(fmt.Sprintf(format, v...)) }
func (g logger) Tracef(format string, v ...any)  { g.l.Debug(fmt.Sprintf(format, v...)) }

func (g logger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	g.l.Error(msg)
	select {
	case g.fatal <- msg:
	default:
	}
}
