package relay_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testenv"
	mqttpub "github.com/outboxgo/outbox/mqtt"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/webhook"
)

// BenchmarkDrainEndpoints drains a backlog of b.N events from PostgreSQL
// to the MQTT broker (the local Mosquitto, QoS 1) and to an HTTP endpoint
// (a local server answering 204), unordered and ordered (1,000 keys), each
// beside its raw client sending b.N messages of the same size in batches
// of 1,000, every message of a batch in flight at once, in the same run.
//
//	go test -run '^$' -bench DrainEndpoints -benchtime 20000x ./relay/
func BenchmarkDrainEndpoints(b *testing.B) {
	b.Run("mqtt", func(b *testing.B) {
		testenv.RequireTCP(b, "Mosquitto", "127.0.0.1:1883")
		for _, mode := range []string{"unordered", "ordered"} {
			b.Run(mode, func(b *testing.B) {
				benchDrain(b, 1, 0, mqttBench, &relay.Config{Unordered: mode == "unordered"})
			})
		}
		b.Run("raw paho", rawPaho)
	})
	b.Run("webhook", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer srv.Close()
		for _, mode := range []string{"unordered", "ordered"} {
			b.Run(mode, func(b *testing.B) {
				benchDrain(b, 1, 0, func(b *testing.B, _ *bundle) publishers.Publisher { return webhookBench(b, srv.URL) },
					&relay.Config{Unordered: mode == "unordered"})
			})
		}
		b.Run("raw net/http", func(b *testing.B) { rawHTTP(b, srv.URL) })
	})
}

func mqttBench(b *testing.B, _ *bundle) publishers.Publisher {
	p, err := mqttpub.NewPublisher(&mqttpub.PublisherConfig{URL: "mqtt://127.0.0.1:1883",
		TopicPrefix: fmt.Sprintf("outbox-bench-%d/", time.Now().UnixNano())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// rawPaho publishes b.N 200-byte messages at QoS 1 with the plain paho
// client, a batch of 1,000 in flight at once, each with the ID as a user
// property.
func rawPaho(b *testing.B) {
	nc, err := net.Dial("tcp", "127.0.0.1:1883")
	if err != nil {
		testenv.Unreachable(b, "Mosquitto", err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: nc})
	ctx := context.Background()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("outbox-bench-raw-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}); <-c.Done() })
	topic := fmt.Sprintf("outbox-bench-raw-%d/bench", time.Now().UnixNano())
	payload := make([]byte, 200)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; done += 1000 {
		n := min(1000, b.N-done)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			props := paho.UserProperties{{Key: "outbox-id", Value: outbox.NewID().String()}}
			wg.Go(func() {
				_, errs[i] = c.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: payload, Properties: &paho.PublishProperties{User: props}})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// benchSecret is a signing secret in the whsec_ form.
func benchSecret(b *testing.B) string {
	key := make([]byte, 24)
	if _, err := rand.Read(key); err != nil {
		b.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

func webhookBench(b *testing.B, url string) publishers.Publisher {
	p, err := webhook.New(&webhook.Config{Endpoint: url + "/hooks/{topic}", Secrets: []string{benchSecret(b)},
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// rawHTTP posts b.N 200-byte bodies to url with net/http, 16 requests in
// flight at once (the publisher's default per host), a batch of 1,000 at
// a time.
func rawHTTP(b *testing.B, url string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	payload := make([]byte, 200)
	sem := make(chan struct{}, 16)
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; done += 1000 {
		n := min(1000, b.N-done)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+"/hooks/bench", bytes.NewReader(payload))
				if err != nil {
					errs[i] = err
					return
				}
				req.Header.Set("Webhook-Id", outbox.NewID().String())
				resp, err := client.Do(req)
				if err != nil {
					errs[i] = err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("message %d: %v", i, err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
