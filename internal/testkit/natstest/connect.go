package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
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
	addr := URL()
	nc, err := nats.Connect(addr, nats.Name("natstest"), nats.Timeout(2*time.Second))
	if err != nil {
		testenv.Unreachable(t, "NATS JetStream at "+addr, err)
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

// codeStoreCreate is nats-server 2.9's "error creating store for stream":
// its file store races the creation of a stream against the deletion of
// the account's last other stream (the account's directory goes). A
// second try succeeds.
const codeStoreCreate = 10049

// attempts is how many times NewStream tries a request the server may
// fail transiently (a timeout on a loaded machine, codeStoreCreate), each
// try with a deadline of its own.
const attempts = 5

// NewStream creates a stream of this test's own, capturing subjectPrefix+".>"
// with a DuplicateWindow, and deletes it at cleanup. nc may be a connection
// to a private Server as well; the stream of a private server is left to
// the server's own cleanup.
func NewStream(t testing.TB, nc *nats.Conn) (subjectPrefix, stream string) {
	t.Helper()
	name := Name(t)
	js := JetStream(t, nc)
	cfg := jetstream.StreamConfig{
		Name:       name,
		Subjects:   []string{name + ".>"},
		Duplicates: DuplicateWindow,
		Storage:    jetstream.FileStorage, // survives a restart of a private Server
	}
	err := retry(func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, cfg) // the same config twice is no error
		return err
	})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	if isPrivate(nc) {
		return name, name
	}
	t.Cleanup(func() {
		err := retry(func(ctx context.Context) error {
			err := js.DeleteStream(ctx, name)
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return nil // a try that timed out deleted it after all
			}
			return err
		})
		if err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return name, name
}

// retry runs f until it succeeds, fails for good, or has failed attempts
// times with errors a loaded server gives (timeouts, codeStoreCreate).
func retry(f func(ctx context.Context) error) error {
	var err error
	for range attempts {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = f(ctx)
		cancel()
		var api *jetstream.APIError
		transient := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
			errors.As(err, &api) && api.ErrorCode == codeStoreCreate
		if !transient {
			return err
		}
	}
	return err
}

// isPrivate reports whether nc connects to a private Server.
func isPrivate(nc *nats.Conn) bool {
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil {
			if _, ok := private.Load(u.Host); ok {
				return true
			}
		}
	}
	return false
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
