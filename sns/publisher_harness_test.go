package sns_test

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
	"github.com/outboxgo/outbox/internal/testkit/goawstest"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/sns"
)

const testTopic = "events"

func newPrefix() string { return fmt.Sprintf("outboxtest%d-%d-", os.Getpid(), seq.Add(1)) }

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		g := goawstest.Start(t, testAccessKey)
		return pubEnv(t, g.URL, newPrefix())
	},
	Outage: func(t *testing.T) publishertest.Outage {
		g := goawstest.Start(t, testAccessKey)
		px := tcpproxy.Start(t, strings.TrimPrefix(g.URL, "http://"))
		return publishertest.Outage{
			Env:   pubEnv(t, "http://"+px.Addr, newPrefix()),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	Refusals: []publishertest.Refusal{
		{Name: "unknown access key", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			g := goawstest.Start(t, testAccessKey)
			prefix := newPrefix()
			goawstest.FanOut(t, prefix+testTopic, prefix+"queue")
			return sns.NewPublisher(context.Background(), &sns.PublisherConfig{Region: "us-east-1", Account: testAccount,
				Endpoint: g.URL, Credentials: wrongCreds, TopicPrefix: prefix})
		}},
		{Name: "topic does not exist", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			g := goawstest.Start(t, testAccessKey)
			cfg, err := sns.ConfigFromURL(fmt.Sprintf("sns://%s.us-east-1/%s?endpoint=%s&check_topics=%s", testAccount, newPrefix(), g.URL, env.Topic))
			if err != nil {
				return nil, err
			}
			return sns.NewPublisher(context.Background(), cfg)
		}},
	},
}

// pubEnv: publishers to endpoint under prefix; topic prefix+events fans
// out to the SQS queue prefix+queue of goaws, read back from goaws's
// state. goaws does not deduplicate: no Dedup.
func pubEnv(t *testing.T, endpoint, prefix string) publishertest.Env {
	queue := prefix + "queue"
	goawstest.FanOut(t, prefix+testTopic, queue)
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			p, err := sns.NewPublisher(context.Background(), &sns.PublisherConfig{Region: "us-east-1", Account: testAccount,
				Endpoint: endpoint, Credentials: creds, TopicPrefix: prefix})
			if err != nil {
				t.Fatalf("NewPublisher: %v", err)
			}
			return p
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			deadline := time.Now().Add(timeout)
			for {
				msgs := goawstest.QueueMessages(t, queue)
				if len(msgs) >= n || time.Now().After(deadline) {
					out := make([]publishertest.Received, len(msgs))
					for i, m := range msgs {
						out[i] = translate(t, m)
					}
					return out
				}
				time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
			}
		},
		MaxPayload: sns.DefaultMaxSize,
	}
}

// translate reads a fanned-out message by the attributes the package
// documents, without its code.
func translate(t *testing.T, m goawstest.Message) publishertest.Received {
	r := publishertest.Received{ID: m.Attrs["outbox-id"], Key: m.Attrs["outbox-key"], Type: m.Attrs["outbox-type"],
		Headers: map[string]string{}, Topic: testTopic}
	switch m.Attrs["outbox-body-encoding"] {
	case "":
		r.Payload = []byte(m.Body)
	case "empty":
	case "base64":
		p, err := base64.StdEncoding.DecodeString(m.Body)
		if err != nil {
			t.Errorf("body: %v", err)
		}
		r.Payload = p
	}
	for k, v := range m.Attrs {
		if !strings.HasPrefix(k, "outbox-") {
			r.Headers[k] = v
		}
	}
	if h := m.Attrs["outbox-headers"]; h != "" {
		var more map[string]string
		if err := json.Unmarshal([]byte(h), &more); err != nil {
			t.Errorf("outbox-headers %q: %v", h, err)
		}
		for k, v := range more {
			r.Headers[k] = v
		}
	}
	return r
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
