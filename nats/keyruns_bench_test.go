package nats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/cputime"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
)

// BenchmarkPublishKeyRuns publishes calls of 1,000 messages (200-byte
// payloads) over 1, 10 and 100 keys to an in-process server whose stream
// (R1) allows atomic publish, three ways in one run: "async" — the whole
// call at once, no order kept (the relay's unordered mode); "rounds" — one
// message of each key per call, each call awaited before the next (what
// the relay does in ordered mode when the publisher does not keep key
// order); "atomic" — the whole call with AtomicKeyRuns, each key's run one
// atomic batch; "fast" — the whole call with FastKeyRuns, one fast-ingest
// batch. Reports messages per second and the µs of CPU per message of this
// process (the publisher and the in-process server).
//
//	go test -run '^$' -bench PublishKeyRuns -benchtime 20x .
func BenchmarkPublishKeyRuns(b *testing.B) {
	srv := natstest.StartServer(b, "")
	nc := srv.Connect(b)
	js := natstest.JetStream(b, nc)
	for _, storage := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
		for _, keys := range []int{1, 10, 100} {
			for _, mode := range []string{"async", "rounds", "atomic", "fast"} {
				b.Run(fmt.Sprintf("storage=%s/keys=%d/%s", storage, keys, mode), func(b *testing.B) {
					name := fmt.Sprintf("KR%s%d%s", storage, keys, mode)
					ctx := context.Background()
					if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
						Storage: storage, AllowAtomicPublish: true, AllowBatchPublish: true, Duplicates: outboxnats.DuplicateWindow}); err != nil {
						b.Fatal(err)
					}
					pub := newPublisher(b, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: name, Stream: name,
						AtomicKeyRuns: mode == "atomic", FastKeyRuns: mode == "fast", NoKeyRuns: mode == "async" || mode == "rounds"})
					defer pub.Close()
					if pub.KeepsKeyOrder() != (mode == "atomic" || mode == "fast") {
						b.Fatal("KeepsKeyOrder")
					}
					payload := make([]byte, 200)
					cpu := cputime.Self()
					b.ResetTimer()
					for range b.N {
						msgs := make([]outbox.Message, 1000)
						for i := range msgs {
							msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "t", Key: fmt.Sprint(i % keys), Payload: payload}
						}
						calls := [][]outbox.Message{msgs}
						if mode == "rounds" {
							calls = nil
							for i := 0; i < len(msgs); i += keys {
								calls = append(calls, msgs[i:min(i+keys, len(msgs))])
							}
						}
						for _, c := range calls {
							for _, err := range pub.Publish(ctx, c) {
								if err != nil {
									b.Fatal(err)
								}
							}
						}
					}
					b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
					b.ReportMetric(float64((cputime.Self()-cpu).Microseconds())/float64(b.N*1000), "cpu-µs/msg")
				})
			}
		}
	}
}

// BenchmarkPublishSmallCalls publishes calls of 2 to 64 messages, each
// awaited before the next, as a relay at a few thousand events per second
// makes them: "async", with NoKeyRuns (plain publishes); "fast-distinct",
// with FastKeyRuns and no two messages of one key (plain publishes below
// 32 messages, one fast-ingest batch from 32); "fast-pairs", with
// FastKeyRuns and each key twice (always one batch). Reports the time per
// call (ns/op), messages per second and the µs of CPU per message of this
// process (the publisher and the in-process server).
//
//	go test -run '^$' -bench PublishSmallCalls -benchtime 2s .
func BenchmarkPublishSmallCalls(b *testing.B) {
	srv := natstest.StartServer(b, "")
	nc := srv.Connect(b)
	js := natstest.JetStream(b, nc)
	for _, n := range []int{2, 8, 31, 32, 64, 256} {
		for _, mode := range []string{"async", "fast-distinct", "fast-pairs"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				name := fmt.Sprintf("SC%d%s", n, strings.ReplaceAll(mode, "-", ""))
				ctx := context.Background()
				if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"},
					AllowBatchPublish: true, Duplicates: outboxnats.DuplicateWindow}); err != nil {
					b.Fatal(err)
				}
				fast := mode != "async"
				pub := newPublisher(b, &outboxnats.PublisherConfig{URL: srv.URL(), SubjectPrefix: name, Stream: name,
					FastKeyRuns: fast, NoKeyRuns: !fast})
				defer pub.Close()
				if pub.KeepsKeyOrder() != fast {
					b.Fatal("KeepsKeyOrder")
				}
				perKey := 1
				if mode == "fast-pairs" {
					perKey = 2
				}
				payload := make([]byte, 200)
				cpu := cputime.Self()
				b.ResetTimer()
				for it := range b.N {
					msgs := make([]outbox.Message, n)
					for i := range msgs {
						msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "t", Key: fmt.Sprint((it*n + i) / perKey), Payload: payload}
					}
					for _, err := range pub.Publish(ctx, msgs) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
				b.ReportMetric(float64((cputime.Self()-cpu).Microseconds())/float64(b.N*n), "cpu-µs/msg")
			})
		}
	}
}
