package rabbitmq

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
)

// downPublisher is a Publisher whose broker is not there (a port nothing
// listens on): every message it would send fails as unavailable.
func downPublisher(t *testing.T) *Publisher {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := (&PublisherConfig{URL: "amqp://guest:guest@" + addr + "/", MaxMessageSize: 10, DialTimeout: time.Second}).WithDefaults()
	p := &Publisher{cfg: cfg, done: make(chan struct{})}
	p.log = cfg.Logger
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// localCases are messages the publisher refuses before sending, each with
// the error it must fail with.
func localCases() ([]outbox.Message, []error) {
	return []outbox.Message{
			{ID: outbox.NewID(), Topic: "t", Payload: []byte("0123456789a")},
			{ID: outbox.NewID(), Topic: "t", Headers: map[string]string{strings.Repeat("h", 256): "x"}},
			{ID: outbox.NewID(), Topic: "t", Type: strings.Repeat("T", 256)},
			{ID: outbox.NewID(), Topic: strings.Repeat("t", 256)},
			{ID: outbox.NewID(), Topic: "t", Headers: map[string]string{"CC": "other-queue"}},
			{ID: outbox.NewID(), Topic: "t", Headers: map[string]string{"BCC": "other-queue"}},
		}, []error{ErrTooLarge, ErrNotRepresentable, ErrNotRepresentable, ErrNotRepresentable,
			ErrReservedHeader, ErrReservedHeader}
}

// TestLocalChecksOnEveryPath: what the publisher refuses before sending
// fails as permanent, with its own reason, on every path — a batch that
// is sent, a batch that cannot be (context ended, broker down), and a
// message published alone (the path after the broker closed a channel
// for a message it refused) — never as an outage that a retry would
// publish.
func TestLocalChecksOnEveryPath(t *testing.T) {
	p := downPublisher(t)
	bad, want := localCases()
	good := outbox.Message{ID: outbox.NewID(), Topic: "t", Payload: []byte("ok")}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"broker down", ctx}, {"context ended", canceled}} {
		errs := p.Publish(c.ctx, append([]outbox.Message{good}, bad...))
		if !publishers.IsUnavailable(errs[0]) {
			t.Errorf("%s: the good message: got %v, want unavailable", c.name, errs[0])
		}
		for i, err := range errs[1:] {
			if !publishers.IsPermanent(err) || !errors.Is(err, want[i]) {
				t.Errorf("%s: message %d: got %v, want a permanent %v", c.name, i, err, want[i])
			}
		}
	}
	for i := range bad {
		if err := p.publishAlone(ctx, &bad[i]); !publishers.IsPermanent(err) || !errors.Is(err, want[i]) {
			t.Errorf("alone: message %d: got %v, want a permanent %v", i, err, want[i])
		}
	}
}

func TestRefusedConfig(t *testing.T) {
	for _, c := range []struct {
		code   int
		reason string
		want   bool
	}{
		{403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", true},
		{403, "ACCESS_REFUSED - access to exchange 'x' in vhost '/' refused for user 'u'", true},
		{404, "NOT_FOUND - no exchange 'x' in vhost '/'", true},
		{530, "NOT_ALLOWED - vhost v not found", true},
		{530, "NOT_ALLOWED - access to vhost '/' refused for user 'u': connection limit (1) is reached", false},
		{406, "PRECONDITION_FAILED - message size 100 is larger than configured max size 10", false},
		{320, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", false},
		{501, "FRAME_ERROR", false},
	} {
		err := error(&amqp.Error{Code: c.code, Reason: c.reason, Server: true})
		if got := ConfigRefusal(err) != nil; got != c.want {
			t.Errorf("%d %s: refused %v, want %v", c.code, c.reason, got, c.want)
		}
		got := classifyClose(errors.New("wrapped"), err)
		if publishers.IsMisconfigured(got) == publishers.IsUnavailable(got) || publishers.IsMisconfigured(got) != c.want {
			t.Errorf("%d %s: classified %v", c.code, c.reason, got)
		}
	}
	if ConfigRefusal(errors.New("dial tcp: connection refused")) != nil {
		t.Error("a dial error is no refusal")
	}
}
