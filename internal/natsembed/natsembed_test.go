package natsembed_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/natsembed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A message stored before a restart is still there after it, on the same
// URL, and a client that reconnects forever finds the server again.
func TestRestartKeepsPortAndData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.URL()
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || strings.HasSuffix(url, ":4222") {
		t.Fatalf("URL %q: want a free port on 127.0.0.1", url)
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
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
	var msg *jetstream.RawStreamMsg
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

func TestLoggerAndErrors(t *testing.T) {
	if _, err := natsembed.Start(context.Background(), natsembed.Config{}); err == nil {
		t.Fatal("Start without DataDir succeeded")
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	srv, err := natsembed.Start(context.Background(), natsembed.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(w, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The same port is taken while the first server runs.
	port := srv.URL()[strings.LastIndex(srv.URL(), ":")+1:]
	var p int
	for _, c := range port {
		p = p*10 + int(c-'0')
	}
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := natsembed.Start(short, natsembed.Config{DataDir: t.TempDir(), Port: p}); err == nil {
		t.Error("a second server on the same port started")
	}
	srv.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "JetStream") {
		t.Fatalf("the logger got no JetStream notice:\n%s", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
