package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// atomicEnv is a private server (the nats-server the module requires, with
// atomic batches) and a publisher with AtomicKeyRuns on its stream KR,
// subjects kr.>.
type atomicEnv struct {
	pub *outboxnats.Publisher
	js  jetstream.JetStream
}

func newAtomicEnv(t *testing.T, stream *jetstream.StreamConfig) atomicEnv {
	t.Helper()
	srv := natstest.StartServer(t, "")
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	if stream != nil {
		stream.Name, stream.Subjects, stream.Duplicates = "KR", []string{"kr.>"}, outboxnats.DuplicateWindow
		if _, err := js.CreateStream(ctx, *stream); err != nil {
			t.Fatal(err)
		}
	}
	pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: "kr", Stream: "KR", AtomicKeyRuns: true})
	t.Cleanup(func() { _ = pub.Close() })
	if stream == nil {
		if err := pub.SetupStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return atomicEnv{pub: pub, js: js}
}

// stored returns the messages of stream KR in stream order.
func (e atomicEnv) stored(t *testing.T) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, "KR")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// keyed returns n messages for each key, interleaved in call order.
func keyed(n int, keys ...string) []outbox.Message {
	var msgs []outbox.Message
	for i := range n {
		for _, k := range keys {
			msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "t", Key: k, Payload: fmt.Appendf(nil, "%s-%d", k, i)})
		}
	}
	return msgs
}

// payloads returns the payloads keyed gives key k's first n messages.
func payloads(k string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", k, i)
	}
	return out
}

func publishOK(t *testing.T, pub *outboxnats.Publisher, msgs []outbox.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, err := range pub.Publish(ctx, msgs) {
		if err != nil {
			t.Fatalf("message %d (key %q): %v", i, msgs[i].Key, err)
		}
	}
}

// order returns the payloads stored for each key, in stream order.
func order(stored []*jetstream.RawStreamMsg) map[string][]string {
	out := map[string][]string{}
	for _, m := range stored {
		k, _, _ := outboxnats.KeyAndType(m.Header)
		out[k] = append(out[k], string(m.Data))
	}
	return out
}

func TestAtomicKeyRunsLandInOrder(t *testing.T) {
	e := newAtomicEnv(t, nil) // SetupStream allows atomic publish
	if !e.pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false on a stream SetupStream made with AtomicKeyRuns")
	}
	msgs := keyed(300, "a", "b", "c") // over minAtomicRunR1File: SetupStream's stream is R1, file storage
	msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "t", Payload: []byte("unkeyed")},
		outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "single", Payload: []byte("single-0")})
	msgs = append(msgs, keyed(5, "short")...) // too short for a batch on this stream: one at a time
	publishOK(t, e.pub, msgs)
	stored := e.stored(t)
	if len(stored) != len(msgs) {
		t.Fatalf("stored %d messages, want %d", len(stored), len(msgs))
	}
	got := order(stored)
	for _, k := range []string{"a", "b", "c", "short"} {
		for i, p := range got[k] {
			if want := fmt.Sprintf("%s-%d", k, i); p != want {
				t.Fatalf("key %s: message %d is %s, want %s", k, i, p, want)
			}
		}
	}
	// Each run was one batch: its messages carry one batch ID and sit
	// next to each other in the stream.
	batches := map[string]string{}
	for _, m := range stored {
		k, _, _ := outboxnats.KeyAndType(m.Header)
		id := m.Header.Get("Nats-Batch-Id")
		switch k {
		case "", "single", "short":
			if id != "" {
				t.Errorf("key %q went in batch %s, want a plain publish", k, id)
			}
			continue
		}
		if id == "" {
			t.Fatalf("key %s: a message without Nats-Batch-Id", k)
		}
		if b, ok := batches[k]; ok && b != id {
			t.Fatalf("key %s in batches %s and %s, want one", k, b, id)
		}
		batches[k] = id
	}
}

func TestAtomicKeyRunsFailedBatchStoresNone(t *testing.T) {
	e := newAtomicEnv(t, &jetstream.StreamConfig{AllowAtomicPublish: true, MaxMsgSize: 512, Storage: jetstream.MemoryStorage})
	if !e.pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false on a stream that allows atomic publish")
	}
	const n = 40               // a batch each (memory storage: runs of 2 or more)
	msgs := keyed(n, "a", "b") // a-0 b-0 a-1 b-1 …
	big := 2 * 20              // a-20: over the stream's MaxMsgSize, which the publisher does not know
	msgs[big].Payload = make([]byte, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := e.pub.Publish(ctx, msgs)
	for i, err := range errs {
		switch {
		case i == big:
			if !publishers.IsPermanent(err) {
				t.Errorf("the message over MaxMsgSize: %v, want a permanent error", err)
			}
		case i > big && msgs[i].Key == "a":
			if !publishers.IsNotSent(err) || publishers.IsPermanent(err) || publishers.IsUnavailable(err) {
				t.Errorf("%s, after the failed a-20: %v, want an error classified NotSent only", msgs[i].Payload, err)
			}
		case err != nil:
			t.Errorf("message %d (key %s): %v", i, msgs[i].Key, err)
		}
	}
	stored := e.stored(t)
	got := order(stored)
	if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 20)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", n)) {
		t.Fatalf("stored %v, want a-0 … a-19 and b-0 … b-39", got)
	}
	// Key a's batch stored none of its messages: a-0 … a-19 are there
	// from the one-at-a-time retry, without batch headers. Key b's batch
	// was unaffected.
	for _, m := range stored {
		k, _, _ := outboxnats.KeyAndType(m.Header)
		if id := m.Header.Get("Nats-Batch-Id"); (k == "a") != (id == "") {
			t.Errorf("%s stored with Nats-Batch-Id %q", m.Data, id)
		}
	}
}

func TestAtomicKeyRunsResentDeduplicated(t *testing.T) {
	e := newAtomicEnv(t, &jetstream.StreamConfig{AllowAtomicPublish: true, Storage: jetstream.MemoryStorage})
	if !e.pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	msgs := keyed(50, "a", "b")
	publishOK(t, e.pub, msgs[:80]) // a-0 … a-39, b-0 … b-39: two batches
	// A relay that died before marking re-sends the same events with
	// more behind them: JetStream refuses a batch holding a stored ID, and
	// the publisher sends the run one at a time, deduplicated.
	publishOK(t, e.pub, msgs)
	publishOK(t, e.pub, msgs)
	if d := e.pub.Duplicates(); d != 80+100 {
		t.Errorf("Duplicates() = %d, want 180", d)
	}
	got := order(e.stored(t))
	if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 50)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", 50)) {
		t.Fatalf("stored %v, want each event once, in order", got)
	}
}

func TestAtomicKeyRunsLongerThanABatch(t *testing.T) {
	e := newAtomicEnv(t, nil)
	if !e.pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	msgs := keyed(1010, "a")
	publishOK(t, e.pub, msgs)
	got := order(e.stored(t))["a"]
	if len(got) != len(msgs) {
		t.Fatalf("stored %d, want %d", len(got), len(msgs))
	}
	for i, p := range got {
		if want := fmt.Sprintf("a-%d", i); p != want {
			t.Fatalf("message %d is %s, want %s", i, p, want)
		}
	}
}

func TestKeepsKeyOrderFalseWithoutAtomicPublish(t *testing.T) {
	t.Run("stream without AllowAtomicPublish", func(t *testing.T) {
		e := newAtomicEnv(t, &jetstream.StreamConfig{})
		if e.pub.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder is true on a stream that does not allow atomic publish")
		}
		msgs := keyed(3, "a")
		publishOK(t, e.pub, msgs)
		for _, m := range e.stored(t) {
			if id := m.Header.Get("Nats-Batch-Id"); id != "" {
				t.Fatalf("%s went in batch %s", m.Data, id)
			}
		}
	})
	t.Run("AtomicKeyRuns not set", func(t *testing.T) {
		srv := natstest.StartServer(t, "")
		pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR", NoKeyRuns: true})
		defer pub.Close()
		if err := pub.SetupStream(context.Background()); err != nil {
			t.Fatal(err)
		}
		if pub.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder is true without AtomicKeyRuns, with NoKeyRuns")
		}
	})
	t.Run("shared server", func(t *testing.T) {
		// The shared server may be older than 2.12.1 (Debian's 2.9): then
		// there are no atomic batches and the publisher says so.
		nc := natstest.Connect(t)
		prefix, stream := natstest.NewStream(t, nc)
		pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: prefix, Stream: stream, AtomicKeyRuns: true})
		defer pub.Close()
		info, err := natstest.JetStream(t, nc).Stream(context.Background(), stream)
		if err != nil {
			t.Fatal(err)
		}
		if want := info.CachedInfo().Config.AllowAtomicPublish; pub.KeepsKeyOrder() != want {
			t.Fatalf("KeepsKeyOrder = %v on nats-server %s, stream AllowAtomicPublish %v", !want, nc.ConnectedServerVersion(), want)
		}
		publishOK(t, pub, keyed(3, "a", "b"))
	})
}

// TestPublisherConformanceAtomicKeyRuns runs the publisher suite with
// AtomicKeyRuns on, against private servers whose streams allow atomic
// publish.
func TestPublisherConformanceAtomicKeyRuns(t *testing.T) {
	runKeyRunsConformance(t, func(cfg *jetstream.StreamConfig, outage bool) {
		cfg.AllowAtomicPublish = true
		// Memory storage: every run of two or more goes as a batch; a
		// file stream survives the restart of an outage.
		cfg.Storage = jetstream.MemoryStorage
		if outage {
			cfg.Storage = jetstream.FileStorage
		}
	}, func(cfg *outboxnats.PublisherConfig) { cfg.AtomicKeyRuns = true })
}

// runKeyRunsConformance runs the publisher suite with a key-runs option on
// (pub sets it), against private servers whose streams (stream sets them:
// outage for the Outage case's) take its batches; the publisher must then
// keep key order itself.
func runKeyRunsConformance(t *testing.T, stream func(cfg *jetstream.StreamConfig, outage bool), pub func(*outboxnats.PublisherConfig)) {
	envOf := func(t *testing.T, srv *natstest.Server, outage bool) publishertest.Env {
		nc := srv.Connect(t)
		js := natstest.JetStream(t, nc)
		prefix, name := "kr", "KR"
		cfg := jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".>"}, Duplicates: outboxnats.DuplicateWindow}
		stream(&cfg, outage)
		if _, err := js.CreateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		return publishertest.Env{
			NewPublisher: func(t *testing.T) publishers.Publisher {
				pc := &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: prefix}
				pub(pc)
				p := newPublisher(t, pc)
				if !p.KeepsKeyOrder() {
					t.Fatal("KeepsKeyOrder is false")
				}
				return p
			},
			Topic: testTopic,
			Dedup: true,
			Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
				return received(t, prefix, natstest.WaitForCount(t, js, name, n, timeout))
			},
			MaxPayload: int(nc.MaxPayload()),
		}
	}
	publishertest.Run(t, publishertest.Harness{
		Setup: func(t *testing.T) publishertest.Env {
			if r, ok := refusalOf(t); ok {
				return r.env(t) // credentials: refused before any batch
			}
			return envOf(t, natstest.StartServer(t, ""), false)
		},
		Outage: func(t *testing.T) publishertest.Outage {
			srv := natstest.StartServer(t, "")
			return publishertest.Outage{
				Env:   envOf(t, srv, true),
				Stop:  func(*testing.T) { srv.Shutdown() },
				Start: func(*testing.T) { srv.Start() },
			}
		},
		Refusals: harness.Refusals,
	})
}

// TestAtomicKeyRunsOutage: batches sent while the server goes away fail as
// unavailable; sent again once it is back, each event is stored once, in
// order.
func TestAtomicKeyRunsOutage(t *testing.T) {
	srv := natstest.StartServer(t, "")
	pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR", AtomicKeyRuns: true})
	defer pub.Close()
	ctx := context.Background()
	if err := pub.SetupStream(ctx); err != nil {
		t.Fatal(err)
	}
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	msgs := keyed(600, "a", "b") // batches on an R1 file stream
	publishOK(t, pub, msgs[:600])
	srv.Shutdown()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	for i, err := range pub.Publish(dctx, msgs[600:]) {
		if !publishers.IsUnavailable(err) {
			t.Fatalf("server down: message %d: %v, want unavailable", i, err)
		}
	}
	cancel()
	back := pub.Conn().StatusChanged(nats.CONNECTED)
	srv.Start()
	select {
	case <-back:
	case <-time.After(time.Minute):
		t.Fatal("the publisher did not reconnect within a minute")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		failed := 0
		for _, err := range pub.Publish(ctx, msgs) { // the relay re-sends everything unmarked
			if err != nil {
				failed++
			}
		}
		if failed == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d messages still fail a minute after the server came back", failed)
		}
	}
	nc := srv.Connect(t)
	e := atomicEnv{pub: pub, js: natstest.JetStream(t, nc)}
	got := order(e.stored(t))
	if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 600)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", 600)) {
		t.Fatalf("stored a %d, b %d messages, want each of 600 once, in order", len(got["a"]), len(got["b"]))
	}
}

func TestAtomicMinRun(t *testing.T) {
	srv := natstest.StartServer(t, "")
	nc := srv.Connect(t)
	ctx := context.Background()
	if _, err := natstest.JetStream(t, nc).CreateStream(ctx, jetstream.StreamConfig{Name: "KR", Subjects: []string{"kr.>"},
		Storage: jetstream.MemoryStorage, AllowAtomicPublish: true, Duplicates: outboxnats.DuplicateWindow}); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: "kr", Stream: "KR", AtomicKeyRuns: true, AtomicMinRun: 20})
	defer pub.Close()
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false")
	}
	msgs := append(keyed(19, "short"), keyed(20, "long")...)
	publishOK(t, pub, msgs)
	e := atomicEnv{pub: pub, js: natstest.JetStream(t, nc)}
	stored := e.stored(t)
	if len(stored) != len(msgs) {
		t.Fatalf("stored %d, want %d", len(stored), len(msgs))
	}
	for _, m := range stored {
		k, _, _ := outboxnats.KeyAndType(m.Header)
		if batched := m.Header.Get("Nats-Batch-Id") != ""; batched != (k == "long") {
			t.Errorf("%s: batched %v, want a batch only for the run of AtomicMinRun", m.Data, batched)
		}
	}
	if got := order(stored); fmt.Sprint(got["short"]) != fmt.Sprint(payloads("short", 19)) || fmt.Sprint(got["long"]) != fmt.Sprint(payloads("long", 20)) {
		t.Fatalf("stored %v out of order", got)
	}
}
