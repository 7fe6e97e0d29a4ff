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

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	outboxnats "github.com/outboxgo/outbox/nats"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			if r, ok := subRefusalOf(t); ok {
				return r.env(t)
			}
			return newSubEnv(t, natstest.URL()).env()
		},
		Outage: func(t *testing.T) subscribertest.Outage {
			u, err := url.Parse(natstest.URL())
			if err != nil {
				t.Fatal(err)
			}
			px := tcpproxy.Start(t, u.Host)
			e := newSubEnv(t, "nats://"+px.Addr)
			return subscribertest.Outage{Env: e.env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{Concurrency: true, HeldWhileDelivered: true, CountsDeliveries: true, Redelivers: true},
		Refusals: []subscribertest.Refusal{
			natsSubRefusal("wrong token", natstest.StartTokenServer, url.User(natstest.Token), url.User("wrong-token")),
			natsSubRefusal("wrong password", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
				url.UserPassword(natstest.User, "wrong-password")),
			natsSubRefusal("account without JetStream", natstest.StartUsersServer, url.UserPassword(natstest.User, natstest.Password),
				url.UserPassword(natstest.NoJetStreamUser, natstest.Password)),
		},
	})
}

// subRefusal is a refused configuration on a private server of its own:
// the suite's Setup gives the refusal's test an env on that server (good
// credentials), and NewSubscriber a subscriber connected with the bad ones.
type subRefusal struct {
	start     func(testing.TB) *natstest.Server
	good, bad *url.Userinfo
}

var (
	subRefusals sync.Map // name as in t.Name() → subRefusal
	subTargets  sync.Map // *testing.T → the refusal's *natstest.Server
)

func natsSubRefusal(name string, start func(testing.TB) *natstest.Server, good, bad *url.Userinfo) subscribertest.Refusal {
	subRefusals.Store(strings.ReplaceAll(name, " ", "_"), subRefusal{start: start, good: good, bad: bad})
	return subscribertest.Refusal{Name: name, New: func(t *testing.T, _ subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
		e, ok := subTargets.Load(t)
		if !ok {
			t.Fatal("no server: Setup did not run for this refusal")
		}
		// The subRefusal may come from the server at connect, or later.
		nc, err := nats.Connect(e.(*subEnv).srv.URLWith(bad), nats.Timeout(2*time.Second))
		if err != nil {
			return nil, err
		}
		t.Cleanup(nc.Close)
		return e.(*subEnv).subscriber(t, nc, c)
	}}
}

// subRefusalOf returns the subRefusal t is the test of, if it is one.
func subRefusalOf(t *testing.T) (subRefusal, bool) {
	i := strings.LastIndex(t.Name(), "/Refused/")
	if i < 0 {
		return subRefusal{}, false
	}
	r, ok := subRefusals.Load(t.Name()[i+len("/Refused/"):])
	if !ok {
		return subRefusal{}, false
	}
	return r.(subRefusal), true
}

// env starts the refusal's server and gives the test streams there.
func (r subRefusal) env(t *testing.T) subscribertest.Env {
	srv := r.start(t)
	good := srv.URLWith(r.good)
	e := newSubEnvAt(t, good, good)
	e.srv = srv
	subTargets.Store(t, e)
	t.Cleanup(func() { subTargets.Delete(t) })
	return e.env()
}

// subEnv is a stream of the test's own, with a dead-letter stream beside it.
type subEnv struct {
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

// newSubEnv is a subEnv on the shared server, whose subscribers connect to
// subURL.
func newSubEnv(t *testing.T, subURL string) *subEnv {
	t.Helper()
	return newSubEnvAt(t, natstest.URL(), subURL)
}

// newSubEnvAt is a subEnv on the server at pubURL (credentials in it).
func newSubEnvAt(t *testing.T, pubURL, subURL string) *subEnv {
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
	return &subEnv{nc: nc, js: js, pubURL: pubURL, subURL: subURL, prefix: name, stream: name, dlSubject: dlName + ".dead", dlStream: dlName,
		published: map[uuid.UUID]bool{}}
}

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{New: e.newSub, Publish: e.publish, PublishNoID: e.publishNoID, Held: e.held,
		DeadLetters: e.deadLetters, Source: e.prefix + ".orders", Orphan: e.orphan}
}

// config is the subscriber config for c: the suite's Options as they
// are, with a short AckWait of the harness's own.
func (e *subEnv) config(c subscribertest.Config) *outboxnats.SubscriberConfig {
	cfg := &outboxnats.SubscriberConfig{Options: c.Options, Stream: e.stream, Durable: c.Group, SubjectPrefix: e.prefix,
		DeadLetterSubject: e.dlSubject, AckWait: 2 * time.Second}
	if c.RedeliverAfter != 0 {
		cfg.AckWait = c.RedeliverAfter
	}
	return cfg
}

// newSub builds a subscriber on a connection of its own to subURL, closed
// at cleanup, after the subscriber's Stop.
func (e *subEnv) newSub(t *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
	nc := e.connect(t, e.subURL)
	if nc == nil {
		return nil, nil // connect failed the test
	}
	return e.subscriber(t, nc, c)
}

// connect connects to url for a subscriber, closing the connection at
// cleanup; a failed connect fails the test.
func (e *subEnv) connect(t *testing.T, url string) *nats.Conn {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// subscriber builds a subscriber of c on nc.
func (e *subEnv) subscriber(t *testing.T, nc *nats.Conn, c subscribertest.Config) (subscribertest.Subscriber, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := outboxnats.NewSubscriber(js, c.Inbox, c.Handler, e.config(c))
	if err != nil {
		return nil, err // a nil *Subscriber is no nil Subscriber
	}
	return sub, nil
}

func (e *subEnv) publish(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	p, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: e.pubURL, SubjectPrefix: e.prefix})
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
func (e *subEnv) stored(t *testing.T) uint64 {
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

func (e *subEnv) publishNoID(t *testing.T, payload string) {
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
func (e *subEnv) held(t *testing.T, group string) int {
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

func (e *subEnv) deadLetters(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
	t.Helper()
	var out []subscribertest.DeadLetter
	for _, m := range natstest.WaitForCount(t, e.js, e.dlStream, n, timeout) {
		h := m.Headers()
		d, _ := strconv.Atoi(h.Get(outboxnats.HeaderDeliveries))
		hs := map[string]string{}
		for k := range h {
			hs[k] = h.Get(k)
		}
		out = append(out, subscribertest.DeadLetter{ID: h.Get(outboxnats.HeaderOriginalMsgID), Payload: string(m.Data()),
			Headers: hs, Error: h.Get(outboxnats.HeaderError), Deliveries: d, Source: h.Get(outboxnats.HeaderSubject),
			Consumer: h.Get(outboxnats.HeaderConsumer)})
		if h.Get(outboxnats.HeaderStream) != e.stream {
			t.Errorf("dead letter %s names stream %q, want %q", m.Subject(), h.Get(outboxnats.HeaderStream), e.stream)
		}
	}
	return out
}

// orphan fetches n messages with the durable consumer a subscriber of c
// creates, and never acknowledges them: JetStream redelivers them after
// the consumer's AckWait.
func (e *subEnv) orphan(t *testing.T, c subscribertest.Config, n int) {
	t.Helper()
	s, err := outboxnats.NewSubscriber(e.js, c.Inbox, c.Handler, e.config(c))
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
