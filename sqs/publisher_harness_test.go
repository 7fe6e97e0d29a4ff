package sqs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/sqs"
)

// testTopic is the topic of the suite; each test's queue prefix isolates
// it.
const testTopic = "events"

// newPrefix returns a queue prefix no other test uses.
func newPrefix() string {
	return fmt.Sprintf("outboxtest%d-%d-", os.Getpid(), seq.Add(1))
}

// queueOf is the queue name of testTopic under prefix.
func queueOf(prefix string, fifo bool) string {
	if fifo {
		return prefix + testTopic + ".fifo"
	}
	return prefix + testTopic
}

func pubHarness(fifo bool) publishertest.Harness {
	return publishertest.Harness{
		Setup: func(t *testing.T) publishertest.Env {
			f := startFake(t)
			return pubEnv(f, f.URL, newPrefix(), fifo)
		},
		Outage: func(t *testing.T) publishertest.Outage {
			f := startFake(t)
			px := tcpproxy.Start(t, strings.TrimPrefix(f.URL, "http://"))
			return publishertest.Outage{
				Env:   pubEnv(f, "http://"+px.Addr, newPrefix(), fifo),
				Stop:  func(*testing.T) { px.Cut() },
				Start: func(t *testing.T) { px.Restore(t) },
			}
		},
		Refusals: []publishertest.Refusal{
			{Name: "unknown access key", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
				f := startFake(t)
				prefix := newPrefix()
				f.CreateQueue(queueOf(prefix, fifo))
				return sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: f.URL,
					Credentials: wrongCreds, QueuePrefix: prefix, FIFO: fifo, MaxSize: env.MaxPayload})
			}},
			{Name: "unknown access key from the URL's default chain", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
				s := sqsfake.New(sqsfake.Options{AccessKeys: []string{"AKIDSOMEONEELSE"}})
				f := startServing(t, s)
				prefix := newPrefix()
				s.CreateQueue(queueOf(prefix, fifo))
				cfg, err := sqs.ConfigFromURL(fmt.Sprintf("sqs://us-east-1/%s?endpoint=%s&fifo=%v", prefix, f, fifo))
				if err != nil {
					return nil, err
				}
				return sqs.NewPublisher(context.Background(), cfg)
			}},
			{Name: "queue does not exist", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
				f := startFake(t)
				return sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: f.URL,
					Credentials: creds, QueuePrefix: newPrefix(), FIFO: fifo, CheckTopics: []string{env.Topic}})
			}},
		},
	}
}

// startServing serves s on a port of 127.0.0.1 and returns its URL.
func startServing(t testing.TB, s *sqsfake.Server) string {
	f := &fake{Server: s}
	hs := newHTTPServer(t, s)
	f.URL = hs
	return hs
}

// pubEnv is the publisher suite's Env: publishers to endpoint (f, or a
// proxy to it) under prefix, read back from f's store. A FIFO queue drops
// a re-sent ID within its 5-minute window: Dedup.
func pubEnv(f *fake, endpoint, prefix string, fifo bool) publishertest.Env {
	queue := queueOf(prefix, fifo)
	f.CreateQueue(queue)
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			p, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: endpoint,
				Credentials: creds, QueuePrefix: prefix, FIFO: fifo})
			if err != nil {
				t.Fatalf("NewPublisher: %v", err)
			}
			return p
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return readQueue(t, f.Server, queue, n, timeout)
		},
		MaxPayload: sqs.DefaultMaxSize,
		Dedup:      fifo,
	}
}

// readQueue returns what queue holds, in send order, once it holds n
// messages or timeout passed, translated as a plain consumer would: the
// attributes the package documents, read here without its code.
func readQueue(t *testing.T, s *sqsfake.Server, queue string, n int, timeout time.Duration) []publishertest.Received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msgs := s.Messages(queue)
		if len(msgs) >= n || time.Now().After(deadline) {
			out := make([]publishertest.Received, len(msgs))
			for i, m := range msgs {
				out[i] = translate(t, m)
			}
			return out
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

func translate(t *testing.T, m sqsfake.Message) publishertest.Received {
	t.Helper()
	val := func(k string) string {
		a := m.Attributes[k]
		if a.DataType == "Binary" {
			return string(a.BinaryValue)
		}
		return a.StringValue
	}
	r := publishertest.Received{ID: val("outbox-id"), Key: val("outbox-key"), Type: val("outbox-type"),
		Headers: map[string]string{}, Topic: testTopic}
	switch val("outbox-body-encoding") {
	case "":
		r.Payload = []byte(m.Body)
	case "empty":
	case "base64":
		p, err := base64.StdEncoding.DecodeString(m.Body)
		if err != nil {
			t.Errorf("message %s: body: %v", m.ID, err)
		}
		r.Payload = p
	default:
		t.Errorf("message %s: outbox-body-encoding %q", m.ID, val("outbox-body-encoding"))
	}
	for k := range m.Attributes {
		if !strings.HasPrefix(k, "outbox-") {
			r.Headers[k] = val(k)
		}
	}
	if h := val("outbox-headers"); h != "" {
		var more map[string]string
		if err := json.Unmarshal([]byte(h), &more); err != nil {
			t.Errorf("message %s: outbox-headers %q: %v", m.ID, h, err)
		}
		for k, v := range more {
			r.Headers[k] = v
		}
	}
	return r
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness(false))
}

func TestPublisherConformanceFIFO(t *testing.T) {
	publishertest.Run(t, pubHarness(true))
}
