package relay_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/testkit/natstest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// BenchmarkDrainNATSAtomic drains a backlog of b.N events (200-byte
// payloads over 1 and 10 keys) from PostgreSQL to an in-process
// nats-server whose stream (R1, file or memory storage) allows atomic
// publish, side by side in one run:
// unordered; ordered with the plain publisher (one event of a key in
// flight at a time); ordered with PublisherConfig.AtomicKeyRuns (the
// publisher keeps key order, so the relay sends a key's run of events in
// one call, as one atomic batch). Each runs against the server directly
// and through a proxy that holds every chunk at least 250µs each way (a
// round trip of at least 0.5 ms, as across a network; on a loaded 2-core
// machine the sleeps overshoot, and the one-key ordered cell shows the
// real round trip: 1 / its events/s).
//
//	go test -run '^$' -bench DrainNATSAtomic -benchtime 5000x ./relay/
func BenchmarkDrainNATSAtomic(b *testing.B) {
	srv := natstest.StartServer(b, "")
	for _, rtt := range []time.Duration{0, 500 * time.Microsecond} {
		url := srv.URL()
		if rtt > 0 {
			url = "nats://" + delayProxy(b, strings.TrimPrefix(url, "nats://"), rtt/2)
		}
		for _, storage := range []jetstream.StorageType{jetstream.FileStorage, jetstream.MemoryStorage} {
			for _, keys := range []int{1, 10} {
				for _, mode := range []string{"unordered", "ordered", "ordered-atomic"} {
					b.Run(fmt.Sprintf("rtt=%v/storage=%s/keys=%d/%s", rtt, storage, keys, mode), func(b *testing.B) {
						drainAtomic(b, srv, url, storage, keys, mode)
					})
				}
			}
		}
	}
}

// drainAtomic writes b.N events over keys keys, then times one relay
// (default config, ordered unless mode says so) draining them through url
// into a stream of its own on srv, of the given storage, that allows
// atomic publish.
func drainAtomic(b *testing.B, srv *natstest.Server, url string, storage jetstream.StorageType, keys int, mode string) {
	bd := setup(b)
	ctx := context.Background()
	nc := srv.Connect(b)
	prefix := fmt.Sprintf("atomic%d", time.Now().UnixNano())
	if _, err := natstest.JetStream(b, nc).CreateStream(ctx, jetstream.StreamConfig{
		Name: prefix, Subjects: []string{prefix + ".>"}, Duplicates: natspub.DuplicateWindow,
		Storage: storage, AllowAtomicPublish: true,
	}); err != nil {
		b.Fatal(err)
	}
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: url, SubjectPrefix: prefix, Stream: prefix,
		AtomicKeyRuns: mode == "ordered-atomic"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	if got, want := pub.KeepsKeyOrder(), mode == "ordered-atomic"; got != want {
		b.Fatalf("KeepsKeyOrder = %v, want %v", got, want)
	}
	n := b.N
	seed(b, bd, n, keys)
	r, err := relay.New(bd.store, pub, &relay.Config{Unordered: mode == "unordered", PollInterval: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	timeDrain(b, r, n, nil)
}

// delayProxy listens on a free port of 127.0.0.1 and forwards each
// connection to addr, holding every chunk read in either direction for
// delay before writing it on. It returns its address.
func delayProxy(b *testing.B, addr string, delay time.Duration) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			closeBoth := func() { _ = c.Close(); _ = s.Close() }
			wg.Go(func() { defer closeBoth(); delayCopy(s, c, delay) })
			wg.Go(func() { defer closeBoth(); delayCopy(c, s, delay) })
		}
	})
	return ln.Addr().String()
}

// delayCopy copies src to dst, each chunk delay after it was read.
func delayCopy(dst io.Writer, src io.Reader, delay time.Duration) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 64<<10)
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{at: time.Now().Add(delay), data: buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.at)) // the delay itself, not a wait for a condition
		if _, err := dst.Write(c.data); err != nil {
			for range chunks { // let the reader finish
			}
			return
		}
	}
}
