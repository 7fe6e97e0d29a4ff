package nats_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// testTopic is the topic every suite case publishes to; the subject prefix
// (a stream per test) isolates the tests.
const testTopic = "events"

// harness runs the suite against the shared NATS, the outage cases
// against a private in-process server, and each refusal against a private
// server that requires credentials.
var harness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		if r, ok := refusalOf(t); ok {
			return r.env(t)
		}
		nc := natstest.Connect(t)
		e, _ := env(t, nc, natstest.URL())
		return e
	},
	Outage: func(t *testing.T) publishertest.Outage {
		srv := natstest.StartServer(t, "")
		e, _ := env(t, srv.Connect(t), srv.URL())
		return publishertest.Outage{
			Env:   e,
			Stop:  func(*testing.T) { srv.Shutdown() },
			Start: func(*testing.T) { srv.Start() },
		}
	},
	Refusals: []publishertest.Refusal{
		natsRefusal("wrong token", natstest.StartTokenServer, url.User(natstest.Token), url.User("wrong-token")),
		natsRefusal("wrong password", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
			url.UserPassword(natstest.User, "wrong-password")),
		natsRefusal("unknown user", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
			url.UserPassword("nobody", natstest.Password)),
		natsRefusal("account without JetStream", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
			url.UserPassword(natstest.NoJetStreamUser, natstest.Password)),
	},
}

// refusal is a refused configuration on a private server of its own: the
// suite's Setup gives the refusal's test an env on that server (good
// credentials), and NewPublisher a publisher with the bad ones.
type refusal struct {
	name      string
	start     func(testing.TB) *natstest.Server
	good, bad *url.Userinfo
}

var (
	refusals sync.Map // name as in t.Name() → refusal
	targets  sync.Map // *testing.T → target of its refusal
)

// target is where a refusal's test publishes: the private server and the
// subject prefix its env reads.
type target struct {
	srv    *natstest.Server
	prefix string
}

func natsRefusal(name string, start func(testing.TB) *natstest.Server, good, bad *url.Userinfo) publishertest.Refusal {
	r := refusal{name: name, start: start, good: good, bad: bad}
	refusals.Store(strings.ReplaceAll(name, " ", "_"), r)
	return publishertest.Refusal{Name: name, New: func(t *testing.T, _ publishertest.Env) (publishers.Publisher, error) {
		v, ok := targets.Load(t)
		if !ok {
			t.Fatal("no server: Setup did not run for this refusal")
		}
		tg := v.(target)
		p, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: tg.srv.URLWith(bad), SubjectPrefix: tg.prefix, ReconnectWait: 50 * time.Millisecond})
		if err != nil {
			if strings.Contains(err.Error(), "wrong-") {
				t.Errorf("the error shows the credentials: %v", err)
			}
			return nil, err // a nil *Publisher is no nil Publisher
		}
		return p, nil
	}}
}

// refusalOf returns the refusal t is the test of, if it is one.
func refusalOf(t *testing.T) (refusal, bool) {
	i := strings.LastIndex(t.Name(), "/Refused/")
	if i < 0 {
		return refusal{}, false
	}
	r, ok := refusals.Load(t.Name()[i+len("/Refused/"):])
	if !ok {
		return refusal{}, false
	}
	return r.(refusal), true
}

// env starts the refusal's server and gives the test a stream there.
func (r refusal) env(t *testing.T) publishertest.Env {
	srv := r.start(t)
	good := srv.URLWith(r.good)
	nc, err := nats.Connect(good)
	if err != nil {
		t.Fatalf("connect with the good credentials: %v", err)
	}
	t.Cleanup(nc.Close)
	e, prefix := env(t, nc, good)
	targets.Store(t, target{srv: srv, prefix: prefix})
	t.Cleanup(func() { targets.Delete(t) })
	return e
}

// env gives a test a stream of its own on the server nc is connected to,
// and returns its subject prefix too.
func env(t *testing.T, nc *nats.Conn, url string) (publishertest.Env, string) {
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, &outboxnats.PublisherConfig{URL: url, SubjectPrefix: prefix})
		},
		Topic: testTopic,
		Dedup: true, // JetStream drops a re-sent Nats-Msg-Id within the duplicate window
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return received(t, prefix, natstest.WaitForCount(t, js, stream, n, timeout))
		},
		MaxPayload: int(nc.MaxPayload()),
	}, prefix
}

// newPublisher returns a publisher made from cfg with a short reconnect
// wait; the caller closes it.
func newPublisher(t testing.TB, cfg *outboxnats.PublisherConfig) *outboxnats.Publisher {
	t.Helper()
	if cfg.ReconnectWait == 0 {
		cfg.ReconnectWait = 50 * time.Millisecond
	}
	p, err := outboxnats.NewPublisher(cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

// received translates what a plain JetStream consumer read, decoding Key
// and Type as the package documentation tells a consumer to: the
// -Base64 header when there is one, else the plain one.
func received(t *testing.T, prefix string, msgs []jetstream.Msg) []publishertest.Received {
	out := make([]publishertest.Received, len(msgs))
	for i, m := range msgs {
		h := m.Headers()
		headers := make(map[string]string, len(h))
		for k := range h {
			headers[k] = h.Get(k)
		}
		out[i] = publishertest.Received{
			ID:      h.Get(outboxnats.HeaderMsgID),
			Key:     documented(t, h, "Outbox-Key"),
			Type:    documented(t, h, "Outbox-Type"),
			Headers: headers,
			Payload: m.Data(),
			Topic:   strings.TrimPrefix(m.Subject(), prefix+"."),
		}
	}
	return out
}

// documented reads the field the headers name and name+"-Base64" carry.
func documented(t *testing.T, h nats.Header, name string) string {
	enc, ok := h[name+"-Base64"]
	if !ok {
		return h.Get(name)
	}
	if _, both := h[name]; both {
		t.Errorf("both %s and %s-Base64 are set", name, name)
	}
	b, err := base64.StdEncoding.DecodeString(enc[0])
	if err != nil {
		t.Errorf("%s-Base64 %q: %v", name, enc[0], err)
	}
	return string(b)
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, harness)
}
