package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/testenv"
)

// DefaultURL is the shared NATS JetStream of the development and CI
// machines.
const DefaultURL = "nats://127.0.0.1:4222"

// URL returns the shared server's URL: OUTBOX_TEST_NATS_URL, or DefaultURL.
func URL() string { return testenv.Getenv("OUTBOX_TEST_NATS_URL", DefaultURL) }

// Connect connects to the shared NATS JetStream and closes the connection at
// cleanup. When the server is unreachable the test skips (or, with CI=true,
// fails).
func Connect(t testing.TB) *nats.Conn {
	t.Helper()
	url := URL()
	nc, err := nats.Connect(url, nats.Name("natstest"), nats.Timeout(2*time.Second))
	if err != nil {
		testenv.Unreachable(t, "NATS JetStream at "+url, err)
		return nil
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on nc, failing the test on error.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	return js
}

// DuplicateWindow is the duplicate window of the streams NewStream creates.
const DuplicateWindow = 2 * time.Minute

// NewStream creates a stream of this test's own, capturing subjectPrefix+".>"
// with a DuplicateWindow, and deletes it at cleanup.
// nc may be a connection to a private Server as well.
func NewStream(t testing.TB, nc *nats.Conn) (subjectPrefix, stream string) {
	t.Helper()
	name := Name(t)
	js := JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{name + ".>"},
		Duplicates: DuplicateWindow,
		Storage:    jetstream.FileStorage, // survives a restart of a private Server
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !nc.IsConnected() {
			return // a private Server the test left down: nothing to clean
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return name, name
}

// Name returns a name for this test that is a valid stream name and subject
// token: the test's name with everything but letters, digits, '-' and '_'
// replaced, and a random suffix.
func Name(t testing.TB) string {
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return s + "_" + hex.EncodeToString(suffix[:])
}
