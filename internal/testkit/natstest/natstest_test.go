package natstest_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testkit/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A restarted server keeps its port and its streams, and a connection made
// before the outage works again after it.
func TestServerRestartKeepsPortAndData(t *testing.T) {
	srv := natstest.StartServer(t, "")
	url := srv.URL()
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	publish := func(data string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.Publish(ctx, prefix+".a", []byte(data), jetstream.WithMsgID(data))
		return err
	}
	if err := publish("before"); err != nil {
		t.Fatal(err)
	}

	srv.Restart()
	if srv.URL() != url {
		t.Fatalf("URL after restart %s, want %s", srv.URL(), url)
	}
	// The old connection reconnects by itself; publish until it has, as a
	// client would (each try bounded, the dedup ID making a try that timed
	// out after storing harmless).
	var err error
	for try := 1; try <= 30; try++ {
		if err = publish("after"); err == nil {
			break
		}
		t.Logf("try %d: %v", try, err)
		time.Sleep(100 * time.Millisecond) // the client's reconnect wait is 50ms
	}
	if err != nil {
		t.Fatalf("publish after restart: %v", err)
	}
	got := natstest.WaitForCount(t, js, stream, 2, 30*time.Second)
	if len(got) != 2 || string(got[0].Data()) != "before" || string(got[1].Data()) != "after" {
		t.Fatalf("read %d messages after restart, want before and after", len(got))
	}
}

// A server requiring credentials refuses a connection without them.
func TestAuthServers(t *testing.T) {
	tok := natstest.StartTokenServer(t)
	if _, err := nats.Connect(tok.URL()); err == nil {
		t.Error("the token server took a connection without the token")
	}
	tok.Connect(t, nats.Token(natstest.Token))
	users := natstest.StartUsersServer(t)
	if _, err := nats.Connect(users.URLWith(url.UserPassword(natstest.User, "wrong"))); err == nil {
		t.Error("the users server took a wrong password")
	}
	js := natstest.JetStream(t, users.Connect(t, nats.UserInfo(natstest.User, natstest.Password)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Errorf("JetStream for %s: %v", natstest.User, err)
	}
	js = natstest.JetStream(t, users.Connect(t, nats.UserInfo(natstest.NoJetStreamUser, natstest.Password)))
	if _, err := js.AccountInfo(ctx); !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		t.Errorf("JetStream for %s: %v, want not enabled for the account", natstest.NoJetStreamUser, err)
	}
}

// WaitForCount returns what is there when fewer than n arrive in time.
func TestWaitForCountTimesOut(t *testing.T) {
	nc := natstest.Connect(t)
	_, stream := natstest.NewStream(t, nc)
	start := time.Now()
	got := natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 1, 300*time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("read %d messages from an empty stream", len(got))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitForCount took %v with a 300ms timeout", d)
	}
}
