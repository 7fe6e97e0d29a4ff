package nats_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/natstest"
	"github.com/outboxgo/outbox/publishers"
	natspub "github.com/outboxgo/outbox/publishers/nats"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// testTopic is the topic every suite case publishes to; the subject prefix
// (a stream per test) isolates the tests.
const testTopic = "events"

// harness runs the suite against the shared NATS, and the outage cases
// against a private in-process server.
var harness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		nc := natstest.Connect(t)
		return env(t, nc, natstest.URL())
	},
	Outage: func(t *testing.T) publishertest.Outage {
		srv := natstest.StartServer(t, "")
		return publishertest.Outage{
			Env:   env(t, srv.Connect(t), srv.URL()),
			Stop:  func(*testing.T) { srv.Shutdown() },
			Start: func(*testing.T) { srv.Start() },
		}
	},
}

// env gives a test a stream of its own on the server nc is connected to.
func env(t *testing.T, nc *nats.Conn, url string) publishertest.Env {
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, natspub.Config{URL: url, SubjectPrefix: prefix})
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return received(prefix, natstest.WaitForCount(t, js, stream, n, timeout))
		},
		MaxPayload: int(nc.MaxPayload()),
	}
}

// newPublisher returns a publisher made from cfg with a short reconnect
// wait; the caller closes it.
func newPublisher(t testing.TB, cfg natspub.Config) *natspub.Publisher {
	t.Helper()
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 50 * time.Millisecond
	}
	p, err := natspub.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// received translates what a plain JetStream consumer read.
func received(prefix string, msgs []jetstream.Msg) []publishertest.Received {
	out := make([]publishertest.Received, len(msgs))
	for i, m := range msgs {
		h := m.Headers()
		headers := make(map[string]string, len(h))
		for k := range h {
			headers[k] = h.Get(k)
		}
		out[i] = publishertest.Received{
			ID:      h.Get(natspub.HeaderMsgID),
			Key:     h.Get(natspub.HeaderKey),
			Type:    h.Get(natspub.HeaderType),
			Headers: headers,
			Payload: m.Data(),
			Topic:   strings.TrimPrefix(m.Subject(), prefix+"."),
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	publishertest.Run(t, harness)
}
