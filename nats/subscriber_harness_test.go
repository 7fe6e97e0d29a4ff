package nats_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	natspub "github.com/outboxgo/outbox/nats"
	natssub "github.com/outboxgo/outbox/nats/natssub"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			if r, ok := refusalOf(t); ok {
				return r.env(t)
			}
			return newEnv(t, natstest.URL()).env()
		},
		Outage: func(t *testing.T) subscribertest.Outage {
			u, err := url.Parse(natstest.URL())
			if err != nil {
				t.Fatal(err)
			}
			px := tcpproxy.Start(t, u.Host)
			e := newEnv(t, "nats://"+px.Addr)
			return subscribertest.Outage{Env: e.env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{Concurrency: true, HeldWhileDelivered: true, CountsDeliveries: true, Redelivers: true},
		Refusals: []subscribertest.Refusal{
			natsRefusal("wrong token", natstest.StartTokenServer, url.User(natstest.Token), url.User("wrong-token")),
			natsRefusal("wrong password", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
				url.UserPassword(natstest.User, "wrong-password")),
			natsRefusal("account without JetStream", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
				url.UserPassword(natstest.NoJetStreamUser, natstest.Password)),
		},
	})
}

// refusal is a refused configuration on a private server of its own: the
// suite's Setup gives the refusal's test an env on that server (good
// credentials), and New a subscriber connected with the bad ones.
type refusal struct {
	start     func(testing.TB) *natstest.Server
	good, bad *url.Userinfo
}

var (
	refusals sync.Map // name as in t.Name() → refusal
	targets  sync.Map // *testing.T → the refusal's *natstest.Server
)

func natsRefusal(name string, start func(testing.TB) *natstest.Server, good, bad *url.Userinfo) subscribertest.Refusal {
	refusals.Store(strings.ReplaceAll(name, " ", "_"), refusal{start: start, good: good, bad: bad})
	return subscribertest.Refusal{Name: name, New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
		e, ok := targets.Load(t)
		if !ok {
			t.Fatal("no server: Setup did not run for this refusal")
		}
		// The refusal may come from the server at connect, or later.
		nc, err := nats.Connect(e.(*env).srv.URLWith(bad), nats.Timeout(2*time.Second))
		if err != nil {
			return nil, err
		}
		t.Cleanup(nc.Close)
		return e.(*env).subscriber(t, nc, c)
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

// env starts the refusal's server and gives the test streams there.
func (r refusal) env(t *testing.T) subscribertest.Env {
	srv := r.start(t)
	good := srv.URLWith(r.good)
	e := newEnvAt(t, good, good)
	e.srv = srv
	targets.Store(t, e)
	t.Cleanup(func() { targets.Delete(t) })
	return e.env()
}

// env is a stream of the test's own, with a dead-letter stream beside it.
type env struct {
	nc             *nats.Conn // the test's own connection
	js             jetstream.JetStream
	pubURL         string           // where the stream is, with credentials
	subURL         string           // where subscribers connect
	srv            *natstest.Server // the refusal's private server, or nil
	prefix, stream string
	dlSubject      string
	dlStream       string
	published      map[uuid.UUID]bool
}

// duplicates is the stream's duplicate window, short for the copies of an
// event the suite publishes.
const duplicates = 100 * time.Millisecond

// newEnv is an env on the shared server, whose subscribers connect to
// subURL.
func newEnv(t *testing.T, subURL string) *env {
	t.Helper()
	return newEnvAt(t, natstest.URL(), subURL)
}

// newEnvAt is an env on the server at pubURL (credentials in it).
func newEnvAt(t *testing.T, pubURL, subURL string) *env {
	t.Helper()
	var nc *nats.Conn
	if pubURL == natstest.URL() {
		nc = natstest.Connect(t)
	} else {
		var err error
		if nc, err = nats.Connect(pubURL); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
	}
	js := natstest.JetStream(t, nc)
	name, dlName := natstest.Name(t), natstest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// In memory: the server's file store races a stream's creation against
	// the deletion of the last other stream (the account's directory goes).
	for _, sc := range []jetstream.StreamConfig{
		{Name: name, Subjects: []string{name + ".>"}, Duplicates: duplicates, Storage: jetstream.MemoryStorage},
		{Name: dlName, Subjects: []string{dlName + ".>"}, Storage: jetstream.MemoryStorage},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = js.DeleteStream(context.Background(), sc.Name) })
	}
	return &env{nc: nc, js: js, pubURL: pubURL, subURL: subURL, prefix: name, stream: name, dlSubject: dlName + ".dead", dlStream: dlName,
		published: map[uuid.UUID]bool{}}
}

func (e *env) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.held,
		DeadLetters: e.deadLetters, Source: e.prefix + ".orders", Orphan: e.orphan}
}

// config is the subscriber config for c.
func (e *env) config(c subscribertest.Config) natssub.Config {
	cfg := natssub.Config{Stream: e.stream, Durable: c.Group, SubjectPrefix: e.prefix, DeadLetterSubject: e.dlSubject,
		MaxDeliver: c.MaxDeliveries, Backoff: natssub.Backoff{Min: c.BackoffMin, Max: c.BackoffMax},
		AckWait: 2 * time.Second, Concurrency: c.Concurrency, Hooks: natssub.Hooks{AfterCommit: c.AfterCommit}}
	if c.RedeliverAfter != 0 {
		cfg.AckWait = c.RedeliverAfter
	}
	if c.AfterSettle != nil {
		cfg.Hooks.AfterSettle = func(st natssub.Settlement) { c.AfterSettle(settlement(st)) }
	}
	return cfg
}

func settlement(st natssub.Settlement) subscribertest.Settlement {
	a := map[natssub.Action]subscribertest.Action{natssub.ActionAck: subscribertest.ActionAck,
		natssub.ActionNak: subscribertest.ActionRetry, natssub.ActionDeadLetter: subscribertest.ActionDeadLetter}[st.Action]
	return subscribertest.Settlement{Message: st.Message, Delivery: st.Delivery, Outcome: st.Outcome, Err: st.Err,
		Action: a, Delay: st.NakDelay}
}

// newSub builds a subscriber on a connection of its own to subURL, closed
// at cleanup, after the subscriber's Stop.
func (e *env) newSub(t *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	nc := e.connect(t, e.subURL)
	if nc == nil {
		return nil, nil // connect failed the test
	}
	return e.subscriber(t, nc, c)
}

// connect connects to url for a subscriber, closing the connection at
// cleanup; a failed connect fails the test.
func (e *env) connect(t *testing.T, url string) *nats.Conn {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// subscriber builds a subscriber of c on nc.
func (e *env) subscriber(t *testing.T, nc *nats.Conn, c subscribertest.Config) (subscribertest.Subscriber, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := natssub.New(js, c.Inbox, c.Handler, e.config(c))
	if err != nil {
		return nil, err // a nil *Subscriber is no nil Subscriber
	}
	return sub, nil
}

func (e *env) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := natspub.New(natspub.Config{URL: e.pubURL, SubjectPrefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send := func(ms []outbox.Message) {
		for i, err := range p.Publish(ctx, ms) {
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	var fresh []outbox.Message
	for _, m := range msgs {
		if !e.published[m.ID] {
			e.published[m.ID] = true
			fresh = append(fresh, m)
			continue
		}
		send(fresh)
		fresh = nil
		before := e.stored(t)
		tick := time.NewTicker(duplicates / 4)
		for e.stored(t) == before {
			if ctx.Err() != nil {
				t.Fatalf("a copy of %s was not stored within 30s", m.ID)
			}
			send([]outbox.Message{m})
			<-tick.C
		}
		tick.Stop()
	}
	send(fresh)
}

// stored is how many messages the stream holds.
func (e *env) stored(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(context.Background(), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func (e *env) publishNoID(t *testing.T, payload string) {
	t.Helper()
	if _, err := e.js.Publish(context.Background(), e.prefix+".orders", []byte(payload)); err != nil {
		t.Fatal(err)
	}
}

// held is what the durable consumer has not acknowledged: the stream's
// messages past its ack floor (a message acknowledged out of order above
// the floor counts too, which the suite's questions never meet); the whole
// stream before the consumer exists. (Not NumPending + NumAckPending: a
// Nak puts a message back in NumPending while it stays in NumAckPending.)
func (e *env) held(t *testing.T, group string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	sinfo, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.js.Consumer(ctx, e.stream, group)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return int(sinfo.State.Msgs)
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(sinfo.State.LastSeq - info.AckFloor.Stream)
}

func (e *env) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
	t.Helper()
	var out []subscribertest.DeadLetter
	for _, m := range natstest.WaitForCount(t, e.js, e.dlStream, n, timeout) {
		h := m.Headers()
		d, _ := strconv.Atoi(h.Get(natssub.HeaderDeliveries))
		hs := map[string]string{}
		for k := range h {
			hs[k] = h.Get(k)
		}
		out = append(out, subscribertest.DeadLetter{ID: h.Get(natssub.HeaderOriginalMsgID), Payload: string(m.Data()),
			Headers: hs, Error: h.Get(natssub.HeaderError), Deliveries: d, Source: h.Get(natssub.HeaderSubject),
			Consumer: h.Get(natssub.HeaderConsumer)})
		if h.Get(natssub.HeaderStream) != e.stream {
			t.Errorf("dead letter %s names stream %q, want %q", m.Subject(), h.Get(natssub.HeaderStream), e.stream)
		}
	}
	return out
}

// orphan fetches n messages with the durable consumer a subscriber of c
// creates, and never acknowledges them: JetStream redelivers them after
// the consumer's AckWait.
func (e *env) orphan(t *testing.T, c subscribertest.Config, n int) {
	t.Helper()
	s, err := natssub.New(e.js, c.Inbox, c.Handler, e.config(c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := e.js.CreateOrUpdateConsumer(ctx, e.stream, s.ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < n && ctx.Err() == nil {
		batch, err := cons.Fetch(n-got, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
			got++
		}
	}
	if got != n {
		t.Fatalf("the dying consumer got %d messages, want %d", got, n)
	}
}
