package nats_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// bundle is what most tests here need: a publisher writing to a stream of
// the test's own on the shared server.
type bundle struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	pub    *outboxnats.Publisher
	prefix string
	stream string
}

func setup(t *testing.T) bundle {
	t.Helper()
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
	t.Cleanup(func() { _ = pub.Close() })
	return bundle{nc: nc, js: natstest.JetStream(t, nc), pub: pub, prefix: prefix, stream: stream}
}

func msg(topic string) outbox.Message {
	return outbox.Message{ID: outbox.NewID(), Topic: topic, Payload: []byte("x"), CreatedAt: time.Now()}
}

func publish(t *testing.T, p publishers.Publisher, msgs ...outbox.Message) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Publish(ctx, msgs)
}

func TestInvalidSubjectIsPermanent(t *testing.T) {
	b := setup(t)
	bad := []string{"a b", "a\tb", "a..b", "a.", "a.*", "a.>", "*", ">"}
	var msgs []outbox.Message
	for _, topic := range bad {
		msgs = append(msgs, msg(topic))
	}
	good := msg("ok")
	msgs = append(msgs, good)
	errs := publish(t, b.pub, msgs...)
	for i, topic := range bad {
		if !publishers.IsPermanent(errs[i]) {
			t.Errorf("topic %q: got %v, want Permanent", topic, errs[i])
		}
	}
	if err := errs[len(bad)]; err != nil {
		t.Fatalf("good message: %v", err)
	}
	got := natstest.WaitForCount(t, b.js, b.stream, 1, 10*time.Second)
	if len(got) != 1 || got[0].Headers().Get(outboxnats.HeaderMsgID) != good.ID.String() {
		t.Fatalf("stream holds %d messages, want only the good one", len(got))
	}
}

func TestBadHeaderIsPermanent(t *testing.T) {
	b := setup(t)
	cases := []map[string]string{
		{"a": "line\r\nInjected: yes"},
		{"a b": "v"},
		{"a:b": "v"},
	}
	for _, h := range cases {
		m := msg("t")
		m.Headers = h
		if errs := publish(t, b.pub, m); !publishers.IsPermanent(errs[0]) {
			t.Errorf("headers %q: got %v, want Permanent", h, errs[0])
		}
	}
}

func TestHeaders(t *testing.T) {
	b := setup(t)
	m := msg("orders")
	m.Key, m.Type = "k1", "OrderConfirmed"
	m.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	m.Headers = map[string]string{"Nats-Msg-Id": "spoofed", "traceparent": "tp"}
	if errs := publish(t, b.pub, m); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := natstest.WaitForCount(t, b.js, b.stream, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("read %d messages, want 1", len(got))
	}
	h, subj := got[0].Headers(), got[0].Subject()
	want := map[string]string{
		outboxnats.HeaderMsgID:     m.ID.String(),
		outboxnats.HeaderKey:       "k1",
		outboxnats.HeaderType:      "OrderConfirmed",
		outboxnats.HeaderCreatedAt: "2026-01-02T03:04:05.000000006Z",
		"traceparent":              "tp",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, h.Get(k), v)
		}
	}
	if subj != b.prefix+".orders" {
		t.Errorf("subject %q, want %q", subj, b.prefix+".orders")
	}
}

func TestSubjectFunc(t *testing.T) {
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	pub := newPublisher(t, &outboxnats.PublisherConfig{
		URL:           natstest.URL(),
		SubjectPrefix: "ignored",
		Subject:       func(topic string) string { return prefix + ".mapped." + topic },
	})
	t.Cleanup(func() { _ = pub.Close() })
	if errs := publish(t, pub, msg("x")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 1, 10*time.Second)
	if len(got) != 1 || got[0].Subject() != prefix+".mapped.x" {
		t.Fatalf("got %d messages, subject of first %q", len(got), got[0].Subject())
	}
}

func TestDuplicatesCounted(t *testing.T) {
	b := setup(t)
	msgs := []outbox.Message{msg("t"), msg("t"), msg("t")}
	for round := range 2 {
		for i, err := range publish(t, b.pub, msgs...) {
			if err != nil {
				t.Fatalf("round %d, message %d: %v", round, i, err)
			}
		}
	}
	if got := b.pub.Duplicates(); got != int64(len(msgs)) {
		t.Fatalf("Duplicates() = %d, want %d", got, len(msgs))
	}
}

// A subject no stream captures is a configuration error JetStream reports
// for that message: neither an outage nor a permanent rejection, and the
// error says what is wrong.
func TestNoStreamIsRetryable(t *testing.T) {
	b := setup(t)
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: b.prefix + "_nostream"})
	t.Cleanup(func() { _ = pub.Close() })
	err := publish(t, pub, msg("t"))[0]
	if err == nil || publishers.IsPermanent(err) || publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
		t.Fatalf("got %v, want an unclassified error", err)
	}
	want := `no JetStream stream captures subject "` + b.prefix + `_nostream.t"`
	if !errors.Is(err, outboxnats.ErrNoStream) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, want ErrNoStream saying %s", err, want)
	}
}

func TestStreamMaxMsgSizeIsPermanent(t *testing.T) {
	nc := natstest.Connect(t)
	js := natstest.JetStream(t, nc)
	name := natstest.Name(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, MaxMsgSize: 512}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: name})
	t.Cleanup(func() { _ = pub.Close() })
	big, small := msg("t"), msg("t")
	big.Payload = make([]byte, 1024)
	errs := publish(t, pub, big, small)
	if !publishers.IsPermanent(errs[0]) {
		t.Errorf("over the stream's max_msg_size: got %v, want Permanent", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("small message: %v", errs[1])
	}
}

// A server without JetStream is a configuration the broker refuses, in
// Check and in every publish.
func TestJetStreamDisabledIsMisconfigured(t *testing.T) {
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.JetStream = false })
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL()})
	t.Cleanup(func() { _ = pub.Close() })
	if err := check(t, pub); !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
		t.Errorf("Check: got %v, want Misconfigured", err)
	}
	for i, err := range publish(t, pub, msg("t"), msg("t")) {
		if !publishers.IsMisconfigured(err) || publishers.IsUnavailable(err) {
			t.Errorf("message %d: got %v, want Misconfigured", i, err)
		}
	}
}

func check(t *testing.T, p *outboxnats.Publisher) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Check(ctx)
}

// Check passes on a good server and says Unavailable, at once, while the
// server is down.
func TestCheckUnavailable(t *testing.T) {
	b := setupPrivate(t)
	if err := check(t, b.pub); err != nil {
		t.Fatalf("Check with the server up: %v", err)
	}
	b.srv.Shutdown()
	start := time.Now()
	if err := check(t, b.pub); !publishers.IsUnavailable(err) || publishers.IsMisconfigured(err) {
		t.Fatalf("Check with the server down: got %v, want Unavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Check took %v with the server down", d)
	}
}

func TestNewUnreachableRedactsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	_, err = outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: "nats://alice:s3cret@" + addr, ConnectTimeout: time.Second})
	if err == nil {
		t.Fatal("NewPublisher succeeded against a closed port")
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret") || !strings.Contains(msg, "alice:xxxxx@"+addr) {
		t.Fatalf("error %q: want the URL named with its password redacted", msg)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []*outboxnats.PublisherConfig{
		{MaxPending: -1},
		{AckTimeout: -time.Second},
		{SubjectPrefix: "a b"},
		{SubjectPrefix: "a.*"},
		{ConnectTimeout: -time.Second},
		{ReconnectWait: -time.Second},
		{Stream: "EVENTS", SubjectPrefix: outboxnats.NoSubjectPrefix},
		{Stream: "EVENTS", Subject: func(topic string) string { return topic }},
		{Stream: "EV.ENTS"},
		{Stream: "EV ENTS"},
	} {
		if _, err := outboxnats.NewPublisher(cfg); err == nil {
			t.Errorf("NewPublisher(%+v) succeeded, want a config error", cfg)
		}
	}
}

// A connection passed in stays open after Close, and the publisher leaves
// nothing subscribed on it.
func TestCloseKeepsCallersConn(t *testing.T) {
	b := setup(t)
	nc, err := nats.Connect(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: b.prefix})
	if errs := publish(t, pub, msg("t")); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	if !nc.IsConnected() {
		t.Fatal("Close closed the caller's connection")
	}
	if n := nc.NumSubscriptions(); n != 0 {
		t.Fatalf("%d subscriptions left on the caller's connection", n)
	}
	if err := publish(t, pub, msg("t"))[0]; !errors.Is(err, outboxnats.ErrClosed) {
		t.Fatalf("publish after Close: got %v, want ErrClosed", err)
	}
}

func TestEnsureStream(t *testing.T) {
	b := setup(t)
	name := natstest.Name(t)
	ctx := context.Background()
	t.Cleanup(func() { _ = b.js.DeleteStream(context.Background(), name) })
	if err := b.pub.EnsureStream(ctx, name, []string{name + ".a.>"}); err != nil {
		t.Fatal(err)
	}
	if err := b.pub.EnsureStream(ctx, name, []string{name + ".a.>", name + ".b.>"}); err != nil {
		t.Fatal(err)
	}
	s, err := b.js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if len(cfg.Subjects) != 2 || cfg.Duplicates != outboxnats.DuplicateWindow {
		t.Fatalf("stream subjects %v, duplicate window %v", cfg.Subjects, cfg.Duplicates)
	}
}

// A publish nobody acknowledges (a plain subscriber takes the subject, no
// stream) fails as Unavailable after AckTimeout, every message of the
// batch, and frees its slot: the next publish goes out.
func TestAckTimeout(t *testing.T) {
	nc := natstest.Connect(t)
	prefix := natstest.Name(t)
	sub, err := nc.SubscribeSync(prefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix, AckTimeout: 200 * time.Millisecond, MaxPending: 2})
	t.Cleanup(func() { _ = pub.Close() })
	for round := range 2 {
		start := time.Now()
		for i, err := range publish(t, pub, msg("t"), msg("t")) {
			if !publishers.IsUnavailable(err) || !errors.Is(err, nats.ErrTimeout) {
				t.Errorf("round %d, message %d: got %v, want Unavailable (timeout)", round, i, err)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("round %d took %v with a 200ms AckTimeout", round, d)
		}
	}
}
