package pubsub_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/pubsub"
)

// testTopic is the outbox topic of the suite; each test's topic prefix
// (and project) isolates it.
const testTopic = "events"

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		return pubEnv(t, newWorld(t), nil)
	},
	Outage: func(t *testing.T) publishertest.Outage {
		w := newWorld(t)
		px := tcpproxy.Start(t, emulatorHost())
		return publishertest.Outage{
			Env:   pubEnv(t, w, []option.ClientOption{option.WithEndpoint(px.Addr)}),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	// The emulator checks no credentials and has no IAM: what it can
	// refuse is a target that does not exist.
	Refusals: []publishertest.Refusal{
		{Name: "missing topic", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			w := envWorld(env)
			return newFromURL(t, fmt.Sprintf("pubsub://%s?%s", w.project, url.Values{
				"topic_prefix": {fmt.Sprintf("missing-%d-", seq.Add(1))}, "check_topics": {env.Topic}}.Encode()))
		}},
		{Name: "wrong project", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			w := envWorld(env)
			return newFromURL(t, fmt.Sprintf("pubsub://outbox-wrong-%d?%s", seq.Add(1), url.Values{
				"topic_prefix": {w.prefix}, "check_topics": {env.Topic}}.Encode()))
		}},
	},
}

// worlds maps each Env's topic to its world. Envs carry no state of their own: the
// refusals find their world through the Env's Topic, which is unique.
var (
	worlds   = map[string]*world{}
	worldsMu sync.Mutex
)

func envWorld(env publishertest.Env) *world {
	worldsMu.Lock()
	defer worldsMu.Unlock()
	return worlds[env.Topic]
}

// newFromURL is a refused publisher as the CLI makes it, from a URL.
func newFromURL(t *testing.T, rawURL string) (publishers.Publisher, error) {
	cfg, err := pubsub.ConfigFromURL(rawURL)
	if err != nil {
		return nil, err
	}
	p, err := pubsub.NewPublisher(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pubEnv is the publisher suite's Env of w: a topic with an ordering
// subscription read by a plain client, and publishers to it made with
// opts. Pub/Sub keeps no record of the IDs it was given: no Dedup.
func pubEnv(t *testing.T, w *world, opts []option.ClientOption) publishertest.Env {
	topic := fmt.Sprintf("%s%d", testTopic, seq.Add(1))
	name := w.createTopic(t, topic)
	c := w.collect(t, w.createSub(t, name, w.prefix+"sub", nil))
	worldsMu.Lock()
	worlds[topic] = w
	worldsMu.Unlock()
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			return newPublisher(t, pubsub.PublisherConfig{Project: w.project, TopicPrefix: w.prefix,
				ClientOptions: opts, PublishTimeout: 3 * time.Second})
		},
		Topic: topic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return received(c.wait(n, timeout))
		},
		MaxPayload: pubsub.MaxMessageBytes,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg pubsub.PublisherConfig) *pubsub.Publisher {
	t.Helper()
	p, err := pubsub.NewPublisher(context.Background(), &cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

func received(msgs []*gpubsub.Message) []publishertest.Received {
	out := make([]publishertest.Received, len(msgs))
	for i, m := range msgs {
		out[i] = publishertest.Received{
			ID:      m.Attributes[pubsub.AttrID],
			Key:     m.Attributes[pubsub.AttrKey],
			Type:    m.Attributes[pubsub.AttrType],
			Topic:   m.Attributes[pubsub.AttrTopic],
			Headers: m.Attributes,
			Payload: m.Data,
		}
	}
	return out
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
