package nats_test

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// A token in the URL appears neither in NewPublisher's error nor in the logs of a
// publisher whose server goes away and comes back.
func TestTokenNeverShown(t *testing.T) {
	const token = "s3cr3t-t0ken"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: "nats://" + token + "@" + addr, ConnectTimeout: time.Second})
	if err == nil || strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "xxxxx@"+addr) {
		t.Fatalf("NewPublisher against a closed port: %v; want an error naming the URL with its token hidden", err)
	}
	if !publishers.IsUnavailable(err) {
		t.Errorf("NewPublisher against a closed port: %v; want Unavailable", err)
	}

	srv := natstest.StartServer(t, "", func(o *server.Options) { o.Authorization = token })
	var logs logtest.Buffer
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URLWith(url.User(token)), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { _ = pub.Close() })
	srv.Shutdown()
	_ = publish(t, pub, msg("t"))
	_ = check(t, pub)
	srv.Start()
	for !pub.Conn().IsConnected() {
		if err := publish(t, pub, msg("t"))[0]; err != nil && strings.Contains(err.Error(), token) {
			t.Fatalf("a publish error shows the token: %v", err)
		}
	}
	_ = pub.Close()
	if got := logs.String(); strings.Contains(got, token) || !strings.Contains(got, "disconnected") {
		t.Fatalf("logs show the token, or no disconnect:\n%s", got)
	}
}

// A server that stops accepting the publisher's token (rotated while the
// publisher was connected) refuses the configuration: publishes and Check
// say Misconfigured, not that the broker is down.
func TestTokenRotatedIsMisconfigured(t *testing.T) {
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.Authorization = "old-token" })
	nc := srv.Connect(t, natsToken("old-token"))
	prefix, _ := natstest.NewStream(t, nc)
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URLWith(url.User("old-token")), SubjectPrefix: prefix})
	t.Cleanup(func() { _ = pub.Close() })
	if err := publish(t, pub, msg("t"))[0]; err != nil {
		t.Fatal(err)
	}
	srv.Reconfigure(func(o *server.Options) { o.Authorization = "new-token" })
	srv.Restart()
	// The client tries the old token until the server has refused it
	// (twice, then nats.go gives up on the connection); publishes fail
	// meanwhile as Unavailable, then as Misconfigured.
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		err = publish(t, pub, msg("t"))[0]
		if err == nil {
			t.Fatal("a publish with the old token succeeded")
		}
		if publishers.IsMisconfigured(err) {
			break
		}
		if !publishers.IsUnavailable(err) {
			t.Fatalf("got %v, want Unavailable then Misconfigured", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the client's state
	}
	if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) || !strings.Contains(err.Error(), "refused the credentials") {
		t.Fatalf("got %v, want Misconfigured saying the credentials were refused", err)
	}
	if err := check(t, pub); !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Fatalf("Check: got %v, want Misconfigured", err)
	}
}

// A publish the server's permissions refuse fails at once as
// Misconfigured, naming the permission; the other subjects publish.
func TestPermissionDeniedIsMisconfigured(t *testing.T) {
	srv := natstest.StartServerConfig(t, `
accounts {
  APP: {
    jetstream: enabled
    users: [
      { user: admin, password: pw }
      { user: limited, password: pw, permissions: { publish: { deny: ["*.denied.>"] } } }
    ]
  }
}
`)
	nc := srv.Connect(t, natsUser("admin", "pw"))
	prefix, stream := natstest.NewStream(t, nc)
	var logs logtest.Buffer
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URLWith(url.UserPassword("limited", "pw")), SubjectPrefix: prefix,
		AckTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(func() { _ = pub.Close() })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := pub.Publish(ctx, []outbox.Message{msg("denied.x"), msg("ok"), msg("denied.y")})
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Publish took %v: the refusal was not noticed", d)
	}
	for _, i := range []int{0, 2} {
		if !publishers.IsMisconfigured(errs[i]) || publishers.IsUnavailable(errs[i]) || !strings.Contains(errs[i].Error(), "ermission") {
			t.Errorf("denied message %d: got %v, want Misconfigured naming the permission", i, errs[i])
		}
	}
	if errs[1] != nil {
		t.Errorf("allowed message: %v", errs[1])
	}
	if got := natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 1, 10*time.Second); len(got) != 1 {
		t.Errorf("stream holds %d messages, want the allowed one", len(got))
	}
	if !strings.Contains(logs.String(), "permission denied") {
		t.Errorf("no error logged:\n%s", logs.String())
	}
}

func natsToken(tok string) nats.Option       { return nats.Token(tok) }
func natsUser(user, pass string) nats.Option { return nats.UserInfo(user, pass) }

// A user who may not subscribe to the replies gets no acknowledgement,
// ever: Check and every publish say Misconfigured at once, not that the
// broker is slow.
func TestRepliesDeniedIsMisconfigured(t *testing.T) {
	srv := natstest.StartServerConfig(t, `
accounts {
  APP: {
    jetstream: enabled
    users: [
      { user: admin, password: pw }
      { user: deaf, password: pw, permissions: { subscribe: { deny: ["_INBOX.>"] } } }
    ]
  }
}
`)
	prefix, _ := natstest.NewStream(t, srv.Connect(t, natsUser("admin", "pw")))
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URLWith(url.UserPassword("deaf", "pw")), SubjectPrefix: prefix, AckTimeout: time.Minute})
	t.Cleanup(func() { _ = pub.Close() })
	start := time.Now()
	if err := check(t, pub); !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Errorf("Check: got %v, want Misconfigured", err)
	}
	for i, err := range publish(t, pub, msg("a"), msg("b")) {
		if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
			t.Errorf("message %d: got %v, want Misconfigured", i, err)
		}
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("took %v: the refusal was not noticed", d)
	}
}
