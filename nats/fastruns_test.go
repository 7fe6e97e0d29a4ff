package nats_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/logtest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
)

// newFastEnv is a private server (the nats-server the module requires,
// with fast-ingest batches) and a publisher with FastKeyRuns on its stream
// KR, subjects kr.>: the stream is created from stream when it is not nil,
// else by SetupStream. The publisher is checked to keep key order.
func newFastEnv(t *testing.T, stream *jetstream.StreamConfig) atomicEnv {
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
	pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: "kr", Stream: "KR", FastKeyRuns: true})
	t.Cleanup(func() { _ = pub.Close() })
	if stream == nil {
		if err := pub.SetupStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !pub.KeepsKeyOrder() {
		t.Fatal("KeepsKeyOrder is false on a stream that allows batch publish")
	}
	return atomicEnv{pub: pub, js: js}
}

// keyOrderKept fails the test when, in results errs of msgs, a message
// of a key succeeded after an earlier one of its key failed: what
// publishers.OrderKeeper forbids.
func keyOrderKept(t *testing.T, msgs []outbox.Message, errs []error) {
	t.Helper()
	failed := map[string]int{}
	for i, err := range errs {
		k := msgs[i].Key
		if k == "" {
			continue
		}
		if j, ok := failed[k]; ok && err == nil {
			t.Fatalf("message %d (key %s) succeeded after message %d of its key failed: %v", i, k, j, errs[j])
		}
		if _, ok := failed[k]; err != nil && !ok {
			failed[k] = i
		}
	}
}

func TestFastKeyRunsLandInOrder(t *testing.T) {
	e := newFastEnv(t, nil) // SetupStream allows batch publish
	msgs := keyed(700, "a", "b", "c")
	msgs = append(msgs, outbox.Message{ID: outbox.NewID(), Topic: "t", Payload: []byte("unkeyed")},
		outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "single", Payload: []byte("single-0")})
	publishOK(t, e.pub, msgs)
	if n := outboxnats.FastBatches(e.pub); n != 1 {
		t.Errorf("%d fast-ingest batches, want the call's one", n)
	}
	stored := e.stored(t)
	if len(stored) != len(msgs) {
		t.Fatalf("stored %d messages, want %d", len(stored), len(msgs))
	}
	got := order(stored)
	for _, k := range []string{"a", "b", "c"} {
		if fmt.Sprint(got[k]) != fmt.Sprint(payloads(k, 700)) {
			t.Fatalf("key %s stored out of order", k)
		}
	}
	// One message goes as a plain publish.
	publishOK(t, e.pub, keyed(1, "d"))
	if n := outboxnats.FastBatches(e.pub); n != 1 {
		t.Errorf("a call of one message started a batch")
	}
}

// A small call with no two messages of one key has no order to keep: it
// goes as plain publishes, a batch costing more than they do. Each of its
// messages is stored; a key repeated, or a call of minFastBatch messages,
// goes as a batch again.
func TestFastKeyRunsSmallCallOfDistinctKeysGoesPlain(t *testing.T) {
	e := newFastEnv(t, nil)
	distinct := keyed(1, "a", "b", "", "c", "")
	publishOK(t, e.pub, distinct)
	if n := outboxnats.FastBatches(e.pub); n != 0 {
		t.Fatalf("a call of five messages, no key twice, started %d fast-ingest batches, want 0", n)
	}
	repeated := keyed(2, "a", "b")
	publishOK(t, e.pub, repeated)
	if n := outboxnats.FastBatches(e.pub); n != 1 {
		t.Fatalf("%d fast-ingest batches after a call with a key twice, want 1", n)
	}
	var large []outbox.Message
	for i := range outboxnats.MinFastBatch {
		large = append(large, keyed(1, fmt.Sprintf("k%d", i))...)
	}
	publishOK(t, e.pub, large)
	if n := outboxnats.FastBatches(e.pub); n != 2 {
		t.Fatalf("%d fast-ingest batches after a call of %d messages, want 2", n, len(large))
	}
	stored := e.stored(t)
	if want := len(distinct) + len(repeated) + len(large); len(stored) != want {
		t.Fatalf("stored %d messages, want %d", len(stored), want)
	}
	if got := order(stored); fmt.Sprint(got["a"]) != "[a-0 a-0 a-1]" || fmt.Sprint(got["b"]) != "[b-0 b-0 b-1]" {
		t.Fatalf("keys a and b stored as %v and %v", got["a"], got["b"])
	}
}

// A message the stream refuses (over its MaxMsgSize, which the publisher
// does not know) fails, permanently; its key's later messages fail too,
// unsent, and are not stored; its key's earlier ones and every other
// key's are stored once, in order — first, middle or last of the batch.
func TestFastKeyRunsRefusedMessageStopsItsKey(t *testing.T) {
	const n = 40
	for _, c := range []struct {
		name string
		big  int // index in a-0 b-0 a-1 b-1 … of the message over MaxMsgSize
	}{{"first", 0}, {"middle", 2 * 20}, {"last", 2*n - 1}} {
		t.Run(c.name, func(t *testing.T) {
			e := newFastEnv(t, &jetstream.StreamConfig{AllowBatchPublish: true, MaxMsgSize: 512, Storage: jetstream.FileStorage})
			msgs := keyed(n, "a", "b")
			msgs = append(msgs[:c.big+1], append([]outbox.Message{{ID: outbox.NewID(), Topic: "t", Payload: []byte("unkeyed")}}, msgs[c.big+1:]...)...)
			msgs[c.big].Payload = make([]byte, 1024)
			bad := msgs[c.big].Key
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs := e.pub.Publish(ctx, msgs)
			keyOrderKept(t, msgs, errs)
			for i, err := range errs {
				switch {
				case i == c.big:
					if !publishers.IsPermanent(err) {
						t.Errorf("the message over MaxMsgSize: %v, want a permanent error", err)
					}
				case i > c.big && msgs[i].Key == bad:
					if !publishers.IsNotSent(err) || publishers.IsPermanent(err) || publishers.IsUnavailable(err) {
						t.Errorf("%s, after the refused one of its key: %v, want an error classified NotSent only", msgs[i].Payload, err)
					}
				case err != nil:
					t.Errorf("message %d (%s): %v", i, msgs[i].Payload, err)
				}
			}
			stored := e.stored(t)
			if len(stored) != len(msgs)-(n-c.big/2) {
				t.Errorf("stored %d messages, want %d: each once", len(stored), len(msgs)-(n-c.big/2))
			}
			got := order(stored)
			want := map[string][]string{"a": payloads("a", n), "b": payloads("b", n), "": {"unkeyed"}}
			want[bad] = want[bad][:c.big/2]
			for k, w := range want {
				if fmt.Sprint(got[k]) != fmt.Sprint(w) {
					t.Errorf("key %q: stored %v, want %v", k, got[k], w)
				}
			}
		})
	}
}

// The relay re-sends after a crash what it published but did not mark:
// the messages already stored are acknowledged as duplicates, the others
// are stored, each once, in order.
func TestFastKeyRunsResentDeduplicated(t *testing.T) {
	e := newFastEnv(t, &jetstream.StreamConfig{AllowBatchPublish: true, Storage: jetstream.FileStorage})
	msgs := keyed(50, "a", "b")
	publishOK(t, e.pub, msgs[:80]) // a-0 … a-39, b-0 … b-39
	publishOK(t, e.pub, msgs)
	publishOK(t, e.pub, msgs)
	if n := outboxnats.FastBatches(e.pub); n != 3 {
		t.Errorf("%d fast-ingest batches, want one a call", n)
	}
	stored := e.stored(t)
	got := order(stored)
	if len(stored) != 100 || fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 50)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", 50)) {
		t.Fatalf("stored %d: %v, want each event once, in order", len(stored), got)
	}
}

// TestFastKeyRunsByDefault: with no option set, SetupStream allows batch
// publish and the publisher sends fast-ingest batches; on a stream that
// does not allow them it says why once, at Info, and publishes as without
// them, and takes them once the stream allows them.
func TestFastKeyRunsByDefault(t *testing.T) {
	t.Run("SetupStream", func(t *testing.T) {
		srv := natstest.StartServer(t, "")
		pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR"})
		defer pub.Close()
		if err := pub.SetupStream(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !pub.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder is false by default on a stream SetupStream made")
		}
		msgs := keyed(6, "a", "b")
		publishOK(t, pub, msgs)
		if n := outboxnats.FastBatches(pub); n == 0 {
			t.Fatal("no fast-ingest batch by default")
		}
	})
	t.Run("stream allows batch publish later", func(t *testing.T) {
		srv := natstest.StartServer(t, "")
		nc := srv.Connect(t)
		js := natstest.JetStream(t, nc)
		ctx := context.Background()
		cfg := jetstream.StreamConfig{Name: "KR", Subjects: []string{"kr.>"}, Duplicates: outboxnats.DuplicateWindow}
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		var logs logtest.Buffer
		pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: "kr",
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		defer pub.Close()
		for range 2 { // asked each time, said once
			if pub.KeepsKeyOrder() {
				t.Fatal("KeepsKeyOrder is true on a stream that does not allow batch publish")
			}
		}
		got := logs.String()
		if n := strings.Count(got, "a key's events go one at a time"); n != 1 || !strings.Contains(got, "level=INFO") ||
			!strings.Contains(got, "stream KR does not allow batch publish") || strings.Contains(got, "level=WARN") {
			t.Errorf("want one line at Info saying why, got:\n%s", got)
		}
		publishOK(t, pub, keyed(3, "a", "b"))
		if n := outboxnats.FastBatches(pub); n != 0 {
			t.Fatalf("%d fast-ingest batches to a stream that does not allow them", n)
		}
		cfg.AllowBatchPublish = true
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if !pub.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder is still false once the stream allows batch publish")
		}
		msgs := keyed(6, "a", "b")
		publishOK(t, pub, msgs)
		if n := outboxnats.FastBatches(pub); n == 0 {
			t.Fatal("no fast-ingest batch once the stream allows them")
		}
	})
}

func TestKeepsKeyOrderFalseWithoutBatchPublish(t *testing.T) {
	t.Run("stream without AllowBatchPublish", func(t *testing.T) {
		srv := natstest.StartServer(t, "")
		nc := srv.Connect(t)
		if _, err := natstest.JetStream(t, nc).CreateStream(context.Background(), jetstream.StreamConfig{Name: "KR", Subjects: []string{"kr.>"}}); err != nil {
			t.Fatal(err)
		}
		var logs logtest.Buffer
		pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: "kr", Stream: "KR", FastKeyRuns: true,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		defer pub.Close()
		for range 2 { // the second asks no more, and says nothing more
			if pub.KeepsKeyOrder() {
				t.Fatal("KeepsKeyOrder is true on a stream that does not allow batch publish")
			}
		}
		if got := logs.String(); strings.Count(got, "FastKeyRuns is set but JetStream cannot") != 1 || !strings.Contains(got, "stream KR does not allow batch publish") {
			t.Errorf("want one warning saying why, got:\n%s", got)
		}
		publishOK(t, pub, keyed(3, "a", "b"))
		if n := outboxnats.FastBatches(pub); n != 0 {
			t.Fatalf("%d fast-ingest batches to a stream that does not allow them", n)
		}
	})
	t.Run("NoKeyRuns", func(t *testing.T) {
		srv := natstest.StartServer(t, "")
		pub := newPublisher(t, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: "kr", Stream: "KR", NoKeyRuns: true})
		defer pub.Close()
		if err := pub.SetupStream(context.Background()); err != nil {
			t.Fatal(err)
		}
		if pub.KeepsKeyOrder() {
			t.Fatal("KeepsKeyOrder is true with NoKeyRuns")
		}
		info, err := natstest.JetStream(t, srv.Connect(t)).Stream(context.Background(), "KR")
		if err != nil {
			t.Fatal(err)
		}
		if info.CachedInfo().Config.AllowBatchPublish {
			t.Error("SetupStream allowed batch publish on a stream of a publisher with NoKeyRuns")
		}
		publishOK(t, pub, keyed(3, "a", "b"))
		if n := outboxnats.FastBatches(pub); n != 0 {
			t.Fatalf("%d fast-ingest batches with NoKeyRuns", n)
		}
	})
	t.Run("shared server", func(t *testing.T) {
		// The shared server may be older than 2.14 (Debian's 2.9): then
		// there are no fast-ingest batches, SetupStream does not ask for
		// them, and the publisher says so and publishes as without them.
		nc := natstest.Connect(t)
		prefix, stream := natstest.NewStream(t, nc)
		pub := newPublisher(t, &outboxnats.PublisherConfig{Conn: nc, SubjectPrefix: prefix, Stream: stream, FastKeyRuns: true})
		defer pub.Close()
		if err := pub.SetupStream(context.Background()); err != nil {
			t.Fatal(err)
		}
		info, err := natstest.JetStream(t, nc).Stream(context.Background(), stream)
		if err != nil {
			t.Fatal(err)
		}
		if want := info.CachedInfo().Config.AllowBatchPublish; pub.KeepsKeyOrder() != want {
			t.Fatalf("KeepsKeyOrder = %v on nats-server %s, stream AllowBatchPublish %v", !want, nc.ConnectedServerVersion(), want)
		}
		msgs := keyed(3, "a", "b")
		publishOK(t, pub, msgs)
		got := order(natstestStored(t, natstest.JetStream(t, nc), stream, len(msgs)))
		if fmt.Sprint(got["a"]) != fmt.Sprint(payloads("a", 3)) || fmt.Sprint(got["b"]) != fmt.Sprint(payloads("b", 3)) {
			t.Fatalf("stored %v", got)
		}
	})
	t.Run("with AtomicKeyRuns", func(t *testing.T) {
		_, err := outboxnats.NewPublisher(&outboxnats.PublisherConfig{URL: "nats://127.0.0.1:1", AtomicKeyRuns: true, FastKeyRuns: true})
		if err == nil || !strings.Contains(err.Error(), "AtomicKeyRuns and FastKeyRuns") {
			t.Fatalf("NewPublisher with both: %v, want a configuration error naming both", err)
		}
		if _, err := outboxnats.ConfigFromURL("nats://h:4222?atomic_key_runs=true&fast_key_runs=true"); err == nil {
			t.Fatal("ConfigFromURL accepts atomic_key_runs and fast_key_runs together")
		}
	})
}

// storedAll reads every message of stream, in stream order.
func storedAll(t *testing.T, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return natstestStored(t, js, stream, int(info.State.Msgs))
}

// natstestStored reads the n messages of stream as raw stream messages,
// in stream order.
func natstestStored(t *testing.T, js jetstream.JetStream, stream string, n int) []*jetstream.RawStreamMsg {
	t.Helper()
	var out []*jetstream.RawStreamMsg
	for _, m := range natstest.WaitForCount(t, js, stream, n, time.Minute) {
		out = append(out, &jetstream.RawStreamMsg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
	}
	return out
}

// TestPublisherConformanceFastKeyRuns runs the publisher suite with
// FastKeyRuns on, against private servers whose streams (file streams,
// which survive the restart of an outage) allow batch publish.
func TestPublisherConformanceFastKeyRuns(t *testing.T) {
	runKeyRunsConformance(t, func(cfg *jetstream.StreamConfig, _ bool) {
		cfg.Storage, cfg.AllowBatchPublish = jetstream.FileStorage, true
	}, func(cfg *outboxnats.PublisherConfig) { cfg.FastKeyRuns = true })
}
