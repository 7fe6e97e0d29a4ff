package nats_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// The package registers nats:// with its parameters and their defaults.
func TestRegistered(t *testing.T) {
	b, err := backend.LookupBroker("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "NATS" || !slices.Equal(b.Schemes, []string{"nats"}) || b.Validate == nil {
		t.Fatalf("registered %+v", b)
	}
	want := map[string]string{"subject_prefix": "outbox", "stream": "", "name": "outbox", "max_pending": "4096",
		"ack_timeout": "30s", "connect_timeout": "2s", "reconnect_wait": "2s", "atomic_key_runs": "false", "fast_key_runs": "auto", "token": ""}
	for _, p := range b.Params {
		if d, ok := want[p.Name]; !ok || d != p.Default || p.Usage == "" {
			t.Errorf("param %+v: want default %q and a usage", p, d)
		}
		delete(want, p.Name)
	}
	if len(want) != 0 {
		t.Errorf("params missing: %v", want)
	}
	if err := b.Validate("nats://h:4222?stream=EVENTS"); err != nil {
		t.Errorf("Validate of a good URL: %v", err)
	}
	if err := b.Validate("nats://h:4222?streams=EVENTS"); err == nil || !strings.Contains(err.Error(), `"streams"`) {
		t.Errorf("Validate of an unknown parameter: %v", err)
	}
}

// Opening a nats:// URL gives a publisher configured by its parameters,
// with the stream it names made to capture PREFIX.>, and says so.
func TestOpenBroker(t *testing.T) {
	nc := natstest.Connect(t)
	js := natstest.JetStream(t, nc)
	prefix, stream := natstest.Name(t), natstest.Name(t)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	var logs logtest.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u := natstest.URL() + "?subject_prefix=" + url.QueryEscape(prefix) + "&stream=" + stream + "&name=register-test&ack_timeout=10s"
	p, err := backend.OpenBroker(ctx, u, &backend.BrokerOptions{Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if lines := logs.Lines(`msg="stream ready"`); len(lines) != 1 || !strings.Contains(lines[0], "stream="+stream) ||
		!strings.Contains(lines[0], "subjects="+prefix+".>") {
		t.Errorf("logs %q: want one stream ready line naming the stream and its subjects", logs.String())
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; !slices.Equal(cfg.Subjects, []string{prefix + ".>"}) || cfg.Duplicates != outboxnats.DuplicateWindow {
		t.Fatalf("stream subjects %v, duplicate window %v", cfg.Subjects, cfg.Duplicates)
	}
	if c, ok := p.(publishers.Checker); !ok {
		t.Fatal("the publisher is no Checker")
	} else if err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	msg := outbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte("{}")}
	if err := p.Publish(ctx, []outbox.Message{msg})[0]; err != nil {
		t.Fatal(err)
	}
	got := natstest.WaitForCount(t, js, stream, 1, 30*time.Second)
	if len(got) != 1 || got[0].Subject() != prefix+".orders" {
		t.Fatalf("stored %d messages, the first on %q; want one on %s.orders", len(got), got[0].Subject(), prefix)
	}
	if np := p.(*outboxnats.Publisher); np.Conn().Opts.Name != "register-test" {
		t.Errorf("connection name %q, want the URL's", np.Conn().Opts.Name)
	}
	// Without parameters: the defaults, and no stream made.
	p2, err := backend.OpenBroker(ctx, natstest.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Close() })
	if err := p2.(publishers.Checker).Check(ctx); err != nil {
		t.Fatal(err)
	}
	if np := p2.(*outboxnats.Publisher); np.Conn().Opts.Name != outboxnats.DefaultName {
		t.Errorf("connection name %q, want %q", np.Conn().Opts.Name, outboxnats.DefaultName)
	}
}

// A bad parameter fails Open with one clear error before connecting; a
// password or token in the URL shows in no error.
func TestOpenBrokerRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"nats://alice:s3cret@127.0.0.1:1?bogus=1", `unknown parameter "bogus"`},
		{"nats://s3cret@127.0.0.1:1?ack_timeout=soon", "ack_timeout"},
		{"nats://127.0.0.1:1?token=s3cret&stream=EVENTS&subject_prefix=", "subject_prefix is empty"},
	} {
		_, err := backend.OpenBroker(ctx, c.url, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("OpenBroker(%q) = %v, want an error saying %q without the secret", c.url, err, c.want)
		}
	}
}

// The token parameter authenticates; a wrong one (there or in the
// user-info) is a refusal that never shows the token.
func TestOpenBrokerToken(t *testing.T) {
	srv := natstest.StartTokenServer(t)
	host := strings.TrimPrefix(srv.URL(), "nats://")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := backend.OpenBroker(ctx, "nats://"+host+"?token="+natstest.Token+"&connect_timeout=5s", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.(publishers.Checker).Check(ctx); err != nil {
		t.Fatalf("Check with the token parameter: %v", err)
	}
	for _, u := range []string{"nats://" + host + "?token=s3cretWRONG", "nats://s3cretWRONG@" + host} {
		p, err := backend.OpenBroker(ctx, u, nil)
		if err == nil {
			_ = p.Close()
			t.Fatalf("OpenBroker(%q) succeeded with a wrong token", u)
		}
		if !publishers.IsMisconfigured(err) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("OpenBroker with a wrong token = %v, want Misconfigured, without the token", err)
		}
	}
}

// A stream that cannot be made fails Open with SetupStream's error,
// classified, and closes the publisher.
func TestOpenBrokerStreamOverlap(t *testing.T) {
	nc := natstest.Connect(t)
	prefix, holder := natstest.NewStream(t, nc) // captures prefix.>
	js := natstest.JetStream(t, nc)
	stream := natstest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := backend.OpenBroker(ctx, natstest.URL()+"?subject_prefix="+prefix+"&stream="+stream, nil)
	if !errors.Is(err, outboxnats.ErrSubjectsOverlap) || !publishers.IsMisconfigured(err) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("OpenBroker onto another stream's subjects = %v, want ErrSubjectsOverlap naming %s", err, holder)
	}
	if _, err := js.Stream(ctx, stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream %s: %v, want not found", stream, err)
	}
}
