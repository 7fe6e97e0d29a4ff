package webhook_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/webhook"
	"github.com/outboxgo/outbox/webhook/verify"
)

// BenchmarkPost compares, in one run against one local httptest server,
// the publisher (signed requests, batches of benchBatch, MaxInFlight
// benchConc) with raw net/http loops posting the same bodies: one at a
// time, and from benchConc goroutines sharing one client. Each reports
// msgs/s.
//
//	go test -run '^$' -bench Post -benchtime 20000x ./
const (
	benchBatch   = 1000
	benchConc    = 16
	benchPayload = 256
)

func BenchmarkPost(b *testing.B) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer s.Close()
	payload := bytes.Repeat([]byte("x"), benchPayload)
	secret := newSecret()
	key, _ := verify.ParseSecret(secret)

	b.Run("publisher", func(b *testing.B) {
		p, err := webhook.New(&webhook.Config{Endpoint: s.URL + "/hooks/{topic}", Secrets: []string{secret},
			MaxInFlight: benchConc, AllowCIDRs: loopback})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		msgs := make([]outbox.Message, benchBatch)
		b.ResetTimer()
		start := time.Now()
		for done := 0; done < b.N; done += benchBatch {
			n := min(benchBatch, b.N-done)
			for i := range msgs[:n] {
				msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Payload: payload}
			}
			for _, err := range p.Publish(context.Background(), msgs[:n]) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	})

	raw := func(b *testing.B, conc int, headers bool) {
		tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		work := make(chan struct{}, b.N)
		for range b.N {
			work <- struct{}{}
		}
		close(work)
		for range conc {
			wg.Go(func() {
				for range work {
					req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/hooks/bench", bytes.NewReader(payload))
					req.Header.Set("Content-Type", "application/octet-stream")
					if headers { // what the publisher sends, signature included
						id := outbox.NewID().String()
						ts := time.Now().Unix()
						for _, k := range []string{"Webhook-Id", "Idempotency-Key"} {
							req.Header.Set(k, id)
						}
						req.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts, 10))
						req.Header.Set("Webhook-Signature", verify.Signature(key, id, ts, payload))
						req.Header.Set("Outbox-Topic", "bench")
						req.Header.Set("User-Agent", "outbox-webhook")
					}
					resp, err := c.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	}
	b.Run("raw-sequential", func(b *testing.B) { raw(b, 1, false) })
	b.Run("raw-concurrent", func(b *testing.B) { raw(b, benchConc, false) })
	b.Run("raw-concurrent-signed", func(b *testing.B) { raw(b, benchConc, true) })
}
