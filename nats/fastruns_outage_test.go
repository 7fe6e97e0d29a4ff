package nats_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// The server goes away while a call's batch is in flight: every message
// is stored (acknowledged) or fails as unavailable, a key's stored ones
// are the first of its messages, and sending the failed ones again once
// the server is back (as the relay does) stores each message once, in
// order.
func TestFastKeyRunsOutage(t *testing.T) {
	srv := natstest.StartServer(t, "")
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR", FastKeyRuns: true})
	defer pub.Close()
	ctx := context.Background()
	if err := pub.SetupStream(ctx); err != nil {
		t.Fatal(err)
	}
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	const n = 20000
	msgs := keyed(n, "a", "b")
	nc := srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	js := natstest.JetStream(t, nc)
	var errs []error
	var wg sync.WaitGroup
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	wg.Go(func() { errs = pub.Publish(pctx, msgs) })
	// Stop the server once part of the call is stored.
	waitStored(t, js, "KR", 500)
	srv.Shutdown()
	wg.Wait()
	keyOrderKept(t, msgs, errs)
	var failed []outbox.Message
	for i, err := range errs {
		switch {
		case err == nil:
		case !publishers.IsUnavailable(err):
			t.Fatalf("message %d: %v, want nil or unavailable", i, err)
		default:
			failed = append(failed, msgs[i])
		}
	}
	if len(failed) == 0 {
		t.Fatal("the whole call was stored before the server stopped: nothing tested")
	}
	t.Logf("%d of %d messages failed as unavailable", len(failed), len(msgs))
	srv.Start()
	// What the server stored: for each key, its first messages, none
	// after one missing.
	for k, got := range order(storedAll(t, js, "KR")) {
		if fmt.Sprint(got) != fmt.Sprint(payloads(k, len(got))) {
			t.Fatalf("key %s: the server stored %d messages with one missing before the last", k, len(got))
		}
	}
	retryUntilAcked(t, pub, failed)
	got := order(storedAll(t, js, "KR"))
	if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", n)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", n)) {
		t.Fatalf("stored a %d, b %d messages, want each of %d once, in order", len(got["a"]), len(got["b"]), n)
	}
}

// waitStored waits, for a minute at most, until stream holds n messages.
func waitStored(t *testing.T, js jetstream.JetStream, stream string, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			info, err := s.Info(ctx)
			if err == nil && info.State.Msgs >= n {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("stream %s did not reach %d messages within a minute", stream, n)
		}
		time.Sleep(time.Millisecond) // polling the stream, bounded by ctx
	}
}

// Acknowledgements that never come (the path stalls after the messages
// left) fail the call's messages as unavailable after AckTimeout; sent
// again once the path is back, each is stored once, in order.
func TestFastKeyRunsLostAcknowledgement(t *testing.T) {
	srv := natstest.StartServer(t, "")
	proxy := tcpproxy.Start(t, strings.TrimPrefix(srv.URL(), "nats://"))
	const ackTimeout = time.Second
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: "nats://" + proxy.Addr, SubjectPrefix: "kr", Stream: "KR",
		FastKeyRuns: true, AckTimeout: ackTimeout})
	defer pub.Close()
	ctx := context.Background()
	if err := pub.SetupStream(ctx); err != nil {
		t.Fatal(err)
	}
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	msgs := keyed(200, "a", "b")
	publishOK(t, pub, msgs[:100])
	proxy.Stall(true)
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	errs := pub.Publish(pctx, msgs[100:])
	cancel()
	if d := time.Since(start); d < ackTimeout {
		t.Errorf("Publish returned after %v, before AckTimeout", d)
	}
	for i, err := range errs {
		if !publishers.IsUnavailable(err) {
			t.Fatalf("message %d, its acknowledgement lost: %v, want unavailable", 100+i, err)
		}
	}
	proxy.Stall(false)
	retryUntilAcked(t, pub, msgs[100:])
	e := atomicEnv{pub: pub, js: natstest.JetStream(t, srv.Connect(t))}
	got := order(e.stored(t))
	if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 200)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", 200)) {
		t.Fatalf("stored a %d, b %d messages, want each of 200 once, in order", len(got["a"]), len(got["b"]))
	}
}

// A server that stops accepting the publisher's token while it sends
// fast-ingest batches refuses the configuration: its publishes say
// Misconfigured, not that the broker is down.
func TestFastKeyRunsTokenRotatedIsMisconfigured(t *testing.T) {
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.Authorization = "old-token" })
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URLWith(url.User("old-token")), SubjectPrefix: "kr", Stream: "KR", FastKeyRuns: true})
	t.Cleanup(func() { _ = pub.Close() })
	if err := pub.SetupStream(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	publishOK(t, pub, keyed(5, "a", "b"))
	srv.Reconfigure(func(o *server.Options) { o.Authorization = "new-token" })
	srv.Restart()
	var errs []error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		errs = publish(t, pub, keyed(5, "a", "b")...)
		if publishers.IsMisconfigured(errs[0]) {
			break
		}
		for i, err := range errs {
			if !publishers.IsUnavailable(err) {
				t.Fatalf("message %d: got %v, want Unavailable then Misconfigured", i, err)
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the client's state
	}
	for i, err := range errs {
		if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) || publishers.IsPermanent(err) {
			t.Fatalf("message %d: got %v, want Misconfigured", i, err)
		}
	}
}

// A publisher started while its server is down (RetryOnFailedConnect, as
// a relay restarted during an outage) cannot tell the server's version:
// it asks again once connected, and takes the batches then, rather than
// taking the unknown version for one too old.
func TestFastKeyRunsPublisherStartedBeforeItsServer(t *testing.T) {
	srv := natstest.StartServer(t, "")
	srv.Shutdown()
	var logs logtest.Buffer
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR", FastKeyRuns: true,
		ReconnectWait: 20 * time.Millisecond, Options: []nats.Option{nats.RetryOnFailedConnect(true)},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer pub.Close()
	if pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is true before the publisher reached its server")
	}
	if got := logs.String(); strings.Contains(got, "need 2.14.0") || !strings.Contains(got, "cannot tell") {
		t.Errorf("want a warning that it cannot tell yet, got:\n%s", got)
	}
	// SetupStream is called while the publisher still retries its first
	// connection, and the server comes up while it runs, just before it
	// looks the stream up: it sets the stream up for the batches of the
	// server that answered. (It used to read the server's version before
	// the lookup, found none, and made a stream without batch publish.)
	restore := outboxnats.BeforeStreamLookup(func() {
		srv.Start()
		if !outboxnats.WaitConnected(pub, time.Minute) {
			t.Error("the publisher did not connect within a minute of the server's start")
		}
	})
	err := pub.SetupStream(context.Background())
	restore()
	if err != nil {
		t.Fatalf("SetupStream once the server started: %v", err)
	}
	if !pub.KeepsKeyOrder() {
		t.Fatalf("KeepsKeyOrder is false once connected to a server that can; log:\n%s", logs.String())
	}
	publishOK(t, pub, keyed(3, "a", "b"))
	if outboxnats.FastBatches(pub) == 0 {
		t.Fatal("no fast-ingest batch once connected")
	}
}
