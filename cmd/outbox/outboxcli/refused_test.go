package outboxcli_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/redistest"
)

// refusedAtStart runs a relay whose broker refuses its configuration: it
// must fail at start — no "trying again", no "still unreachable" — with
// one "outbox: " line saying the broker refused it, exit 1, no secret, and
// publish nothing. --broker-wait bounds a relay that takes the refusal
// for an outage, so the test fails with that line instead of hanging.
func refusedAtStart(t *testing.T, e *env, brokerURL string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"relay", "--broker-url", brokerURL, "--broker-wait", "20s", "--poll-interval", "50ms"}, e.db...)
	code, _, stderr := run(t, ctx, args...)
	if ctx.Err() != nil {
		t.Fatalf("relay to %s did not fail at start: it ran until the test's deadline:\n%s", brokerURL, stderr)
	}
	ls := lines(stderr)
	last := ""
	if len(ls) > 0 {
		last = ls[len(ls)-1]
	}
	if code != 1 || !strings.HasPrefix(last, "outbox: ") {
		t.Fatalf("relay to %s: exit %d, stderr:\n%s", brokerURL, code, stderr)
	}
	if strings.Contains(stderr, "trying again") || strings.Contains(stderr, "still unreachable") {
		t.Errorf("relay to %s took the refusal for an outage:\n%s", brokerURL, stderr)
	}
	for _, w := range append([]string{"refused the configuration"}, want...) {
		if !strings.Contains(last, w) {
			t.Errorf("relay to %s: last line %q does not say %q", brokerURL, last, w)
		}
	}
	if strings.Contains(stderr, "s3cret") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("relay to %s: stderr leaks a secret or a stack:\n%s", brokerURL, stderr)
	}
	if _, st, _ := e.cli("status"); !regexpMatch(st, `(?m)^\(all\)\s+1\s`) {
		t.Errorf("after the refused relay to %s the event is not pending any more:\n%s", brokerURL, st)
	}
}

func TestRelayRefusedRabbitMQ(t *testing.T) {
	testenv.RequireTCP(t, "RabbitMQ at 127.0.0.1:5672", "127.0.0.1:5672")
	e := newPG(t)
	e.enqueue(outbox.Message{Topic: "orders"})
	t.Run("wrong password", func(t *testing.T) {
		refusedAtStart(t, e, "amqp://guest:s3cret@127.0.0.1:5672/", "guest:xxxxx@")
	})
	t.Run("unknown vhost", func(t *testing.T) {
		refusedAtStart(t, e, fmt.Sprintf("amqp://guest:guest@127.0.0.1:5672/nosuchvhost%d", time.Now().UnixNano()))
	})
	t.Run("missing exchange", func(t *testing.T) {
		refusedAtStart(t, e, fmt.Sprintf("amqp://guest:guest@127.0.0.1:5672/?exchange=nosuch%d", time.Now().UnixNano()))
	})
}

func TestRelayRefusedRedis(t *testing.T) {
	testenv.RequireTCP(t, "Redis at 127.0.0.1:6379", "127.0.0.1:6379")
	e := newPG(t)
	e.enqueue(outbox.Message{Topic: "orders"})
	t.Run("unknown database", func(t *testing.T) {
		refusedAtStart(t, e, "redis://127.0.0.1:6379/99")
	})
	t.Run("wrong password", func(t *testing.T) {
		addr := redistest.Start(t, redistest.Options{RequirePass: "right-pw"}).Addr()
		refusedAtStart(t, e, "redis://:s3cret@"+addr+"/0", ":xxxxx@")
	})
}

// A NATS server with token auth: a wrong token fails at start, and the
// token is never printed — not in the startup line, not in the warnings of
// an unreachable broker, not in the final error.
func TestRelayNATSToken(t *testing.T) {
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.Authorization = "s3cretTOKEN" })
	host := strings.TrimPrefix(srv.URL(), "nats://")
	e := newPG(t)
	e.enqueue(outbox.Message{Topic: "orders"})
	t.Run("wrong token", func(t *testing.T) {
		refusedAtStart(t, e, "nats://s3cretWRONG@"+host, "nats://xxxxx@"+host)
	})
	t.Run("right token", func(t *testing.T) {
		relayUntil(t, append([]string{"relay", "--broker-url", "nats://s3cretTOKEN@" + host, "--stream", "EV", "--poll-interval", "50ms"}, e.db...),
			&logtest.Buffer{}, func() bool {
				_, st, _ := e.cli("status")
				return regexpMatch(st, `(?m)^\(all\)\s+0\s`)
			})
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		code, _, stderr := run(t, context.Background(), append([]string{"relay", "--broker-url", "nats://s3cretTOKEN@" + addr + ",nats://s3cretTOKEN@" + addr,
			"--broker-wait", "1s"}, e.db...)...)
		if code != 1 || !strings.Contains(stderr, "broker unreachable; trying again") || !strings.Contains(stderr, "still unreachable after --broker-wait 1s") {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		if strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, "nats://xxxxx@") {
			t.Fatalf("stderr leaks the token or hides the URL:\n%s", stderr)
		}
	})
}

// relayLogsRedacted: the startup line of a relay names the broker with its
// token hidden.
func TestRelayStartupLineRedacted(t *testing.T) {
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.Authorization = "s3cretTOKEN" })
	host := strings.TrimPrefix(srv.URL(), "nats://")
	e := newPG(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- mainWith(ctx, append([]string{"relay", "--broker-url", "nats://s3cretTOKEN@" + host + "?token=s3cretTOKEN", "--log-format", "json"}, e.db...), &stdout, &stderr)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), `"msg":"relaying"`) {
		select {
		case code := <-done:
			t.Fatalf("relay exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no startup line within 60s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cancel()
	<-done
	if s := stderr.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, `"broker":"nats://xxxxx@`+host+`?token=xxxxx"`) {
		t.Fatalf("startup line leaks or omits the broker:\n%s", s)
	}
}
