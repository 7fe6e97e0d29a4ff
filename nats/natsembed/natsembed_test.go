package natsembed_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/nats/natsembed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect connects to url, for the test's life, and returns its JetStream.
func connect(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// start starts a server on a free port and a store directory of the
// test's, shut down when the test ends; ctx bounds the test's calls.
func start(t *testing.T) (context.Context, *natsembed.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	srv, err := natsembed.Start(ctx, natsembed.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return ctx, srv
}

// A message stored before a restart is still there after it, on the same
// URL, and a client that reconnects forever finds the server again.
func TestRestartKeepsPortAndData(t *testing.T) {
	ctx, srv := start(t)
	url := srv.URL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":4222") {
		t.Fatalf("URL %q: want a free port on 127.0.0.1", url)
	}
	js := connect(t, url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.x", []byte("before")); err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	if srv.Running() {
		t.Fatal("Running after Shutdown")
	}
	srv.Shutdown() // a no-op when down
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if !srv.Running() || srv.URL() != url {
		t.Fatalf("after Restart: running %v, URL %q; want running on %q", srv.Running(), srv.URL(), url)
	}
	// The client reconnects; poll until the stream answers.
	var (
		msg *jetstream.RawStreamMsg
		err error
	)
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg, err = func() (*jetstream.RawStreamMsg, error) {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			s, err := js.Stream(c, "S")
			if err != nil {
				return nil, err
			}
			return s.GetMsg(c, 1)
		}()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	if err != nil || string(msg.Data) != "before" {
		t.Fatalf("after restart: %v, %v; want the message stored before", msg, err)
	}
	// Restart while up works too.
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
}

// A client interrupted while it creates a stream (a relay stopped during
// its stream set-up) leaves the request with the server; Shutdown lets the
// server answer it, so the stream is whole after a restart and none of its
// goroutines outlives the server.
func TestShutdownWhileStreamsAreCreated(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx, srv := start(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	const streams = 5
	for i := range streams {
		cfg := fmt.Sprintf(`{"name":"S%d","subjects":["s%d.>"],"storage":"file"}`, i, i)
		// No reply awaited: the requests are the server's once Flush returns.
		if err := nc.Publish(fmt.Sprintf("$JS.API.STREAM.CREATE.S%d", i), []byte(cfg)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Shutdown()
	goleak.VerifyNone(t, before)

	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	js := connect(t, srv.URL())
	for i := range streams {
		if _, err := js.Stream(ctx, fmt.Sprintf("S%d", i)); err != nil {
			t.Errorf("stream S%d after the restart: %v", i, err)
		}
	}
}

func TestLoggerAndErrors(t *testing.T) {
	if _, err := natsembed.Start(context.Background(), natsembed.Config{}); err == nil {
		t.Fatal("Start without DataDir succeeded")
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := natsembed.Start(canceled, natsembed.Config{DataDir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a canceled context: %v", err)
	}
	var info, debug logtest.Buffer
	log := slog.New(multiHandler{slog.NewTextHandler(&info, nil), slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})})
	srv, err := natsembed.Start(context.Background(), natsembed.Config{DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	// At Info, one line of ours; the server's banner only at Debug.
	if got := strings.TrimSpace(info.String()); strings.Count(got, "\n") != 0 || !strings.Contains(got, "embedded NATS server ready") {
		t.Errorf("at Info, want one line saying the server is ready:\n%s", got)
	}
	if got := debug.String(); !strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "JetStream") {
		t.Errorf("at Debug, want the server's notices:\n%s", got)
	}
}

// A port in use fails Start at once, naming the port, whether another
// embedded server or anything else holds it — even without a deadline.
func TestPortInUseFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	first, err := natsembed.Start(context.Background(), natsembed.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Shutdown()
	for _, port := range []int{l.Addr().(*net.TCPAddr).Port, portOf(t, first.URL())} {
		start := time.Now()
		_, err := natsembed.Start(context.Background(), natsembed.Config{DataDir: t.TempDir(), Port: port})
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(port)) {
			t.Errorf("port %d in use: got %v, want an error naming the port", port, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("port %d in use: Start took %v", port, d)
		}
	}
}

func portOf(t *testing.T, url string) int {
	t.Helper()
	p, err := strconv.Atoi(url[strings.LastIndex(url, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// multiHandler writes each record to every handler that takes its level.
type multiHandler []slog.Handler

func (m multiHandler) Enabled(ctx context.Context, l slog.Level) bool {
	for _, h := range m {
		if h.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (m multiHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, h := range m {
		if h.Enabled(ctx, r.Level) {
			if err := h.Handle(ctx, r.Clone()); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m multiHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(multiHandler, len(m))
	for i, h := range m {
		out[i] = h.WithAttrs(as)
	}
	return out
}

func (m multiHandler) WithGroup(name string) slog.Handler {
	out := make(multiHandler, len(m))
	for i, h := range m {
		out[i] = h.WithGroup(name)
	}
	return out
}
