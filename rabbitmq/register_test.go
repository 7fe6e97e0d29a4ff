package rabbitmq_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/rabbitmq"
)

// TestOpenBroker: an amqp:// URL opens, through the registry, a publisher
// that publishes where the URL's parameters say, and passes Check.
func TestOpenBroker(t *testing.T) {
	ex, q := topology(t)
	u, err := url.Parse(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = url.Values{"exchange": {ex}, "routing_key_prefix": {"ev."}, "confirm_timeout": {"10s"}}.Encode()
	declareBinding(t, ex, q, "ev."+testTopic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := backend.OpenBroker(ctx, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	if _, ok := p.(*rabbitmq.Publisher); !ok {
		t.Fatalf("OpenBroker gave a %T", p)
	}
	if err := p.(publishers.Checker).Check(ctx); err != nil {
		t.Fatalf("Check: %v", err)
	}
	m := outbox.Message{ID: outbox.NewID(), Topic: testTopic, Payload: []byte("hello")}
	if err := p.Publish(ctx, []outbox.Message{m})[0]; err != nil {
		t.Fatal(err)
	}
	if got := read(t, q, 1, 15*time.Second); len(got) != 1 || got[0].ID != m.ID.String() || got[0].Topic != "ev."+testTopic {
		t.Fatalf("read %+v", got)
	}
}

// TestOpenBrokerRefuses: a bad URL gives one error naming what is wrong,
// classified as the relay needs it, without the password.
func TestOpenBrokerRefuses(t *testing.T) {
	px := tcpproxy.Start(t, "127.0.0.1:1")
	down := px.Addr
	px.Cut()
	u, err := url.Parse(rabbitURL())
	if err != nil {
		t.Fatal(err)
	}
	wrongPassword := *u
	wrongPassword.User = url.UserPassword(u.User.Username(), "s3cret-wrong")
	for name, c := range map[string]struct {
		url  string
		want string
		is   func(error) bool
	}{
		"unknown parameter": {"amqp://guest:s3cret@127.0.0.1:5672/?exchange=x&routingkey=y", `unknown parameter "routingkey"`, nil},
		"bad value":         {"amqps://guest:s3cret@127.0.0.1:5672/?confirm_timeout=10", `confirm_timeout "10"`, nil},
		"unreachable":       {"amqp://guest:s3cret@" + down + "/?dial_timeout=1s", "dial", publishers.IsUnavailable},
		"wrong password":    {wrongPassword.String(), "(403)", publishers.IsMisconfigured},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := backend.OpenBroker(ctx, c.url, nil)
			if err == nil {
				_ = p.Close()
				t.Fatal("opened")
			}
			if p != nil {
				t.Errorf("a non-nil publisher %T with the error", p)
			}
			if !strings.Contains(err.Error(), c.want) || (c.is != nil && !c.is(err)) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("got %v, want one error saying %s, classified, without the password", err, c.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("the error has more than one line: %q", err)
			}
		})
	}
}

// declareBinding binds queue to exchange with key as well.
func declareBinding(t *testing.T, exchange, queue, key string) {
	t.Helper()
	conn := dialRabbit(t)
	defer conn.Close()
	ch, err := conn.Channel()
	if err == nil {
		err = ch.QueueBind(queue, key, exchange, false, nil)
	}
	if err != nil {
		t.Fatalf("bind %s to %s with %s: %v", queue, exchange, key, err)
	}
}

// TestRegistered: the schemes amqp and amqps are RabbitMQ's, with URL
// forms for help texts, and Validate checks a URL without connecting.
func TestRegistered(t *testing.T) {
	for _, sch := range []string{"amqp", "amqps"} {
		b, err := backend.LookupBroker(sch + "://h/")
		if err != nil {
			t.Fatal(err)
		}
		if b.Name != "RabbitMQ" || len(b.Forms) == 0 || b.Validate == nil || len(b.Params) == 0 {
			t.Fatalf("%s: %+v", sch, b)
		}
		if err := b.Validate(sch + "://guest:s3cret@127.0.0.1:1/?exchange=x"); err != nil {
			t.Errorf("%s: Validate of a good URL to nowhere: %v", sch, err)
		}
		if err := b.Validate(sch + "://guest:s3cret@127.0.0.1:1/?nope=1"); err == nil || !strings.Contains(err.Error(), `"nope"`) ||
			strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: Validate of an unknown parameter: %v", sch, err)
		}
	}
}
