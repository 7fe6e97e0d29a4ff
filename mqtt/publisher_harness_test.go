package mqtt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/mqtt"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
)

// testMaxPacket is the publishers' max_packet_size in the suite; the
// shared broker sets no Maximum Packet Size of its own.
const testMaxPacket = 64 << 10

// testTopic is the topic of the suite; the topic prefix of each test
// isolates the tests.
const testTopic = "events"

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		testenv.RequireTCP(t, brokerName, brokerAddr())
		return pubEnv(t, "mqtt://"+brokerAddr())
	},
	Outage: func(t *testing.T) publishertest.Outage {
		testenv.RequireTCP(t, brokerName, brokerAddr())
		px := tcpproxy.Start(t, brokerAddr())
		return publishertest.Outage{
			Env:   pubEnv(t, "mqtt://"+px.Addr),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	Refusals: []publishertest.Refusal{
		{Name: "wrong password", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			b := startPrivateBroker(t)
			expectNothing(t, b)
			return newFromURL(b.url(userAdmin, "wrong-pw"))
		}},
		{Name: "no credentials where required", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			b := startPrivateBroker(t)
			expectNothing(t, b)
			return newFromURL(b.url("", ""))
		}},
		{Name: "unknown user", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			b := startPrivateBroker(t)
			expectNothing(t, b)
			return newFromURL(b.url("nobody", "nobody-pw"))
		}},
		{Name: "client ID outside the broker's clientid_prefixes", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			b := startPrivateBroker(t, "clientid_prefixes allowed-")
			expectNothing(t, b)
			return newFromURL(b.url(userAdmin, ""))
		}},
	},
}

// expectNothing fails the test, at cleanup, when anything was published
// on the private broker b: what a refused publisher sent must not land.
func expectNothing(t *testing.T, b *privateBroker) {
	r := subscribe(t, b.addr, userAdmin, userAdmin+"-pw", "#")
	t.Cleanup(func() {
		if got := r.wait(1, 100*time.Millisecond); len(got) > 0 {
			t.Errorf("the private broker received %d messages from a refused publisher (topic %q)", len(got), got[0].Topic)
		}
	})
}

// newFromURL is a refused publisher as the CLI makes it, from a URL,
// with a topic prefix of its own.
func newFromURL(rawURL string) (publishers.Publisher, error) {
	cfg, err := mqtt.ConfigFromURL(rawURL + "?topic_prefix=" + newPrefix())
	if err != nil {
		return nil, err
	}
	p, err := mqtt.NewPublisher(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pubEnv is the publisher suite's Env: publishers of pubURL under a
// prefix of the test's own, read back by a plain subscriber of the shared
// broker. MQTT keeps no record of the IDs it was given: no Dedup.
func pubEnv(t *testing.T, pubURL string) publishertest.Env {
	prefix := newPrefix()
	r := subscribe(t, brokerAddr(), "", "", prefix+"#")
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			cfg, err := mqtt.ConfigFromURL(fmt.Sprintf("%s?topic_prefix=%s&max_packet_size=%d", pubURL, prefix, testMaxPacket))
			if err != nil {
				t.Fatal(err)
			}
			return newPublisher(t, *cfg)
		},
		Topic: testTopic,
		Read: func(t *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return r.read(t, prefix, n, timeout)
		},
		// The payload of a packet over max_packet_size (the topic and
		// the properties add more than one byte).
		MaxPayload: testMaxPacket,
		Dedup:      false,
	}
}

// newPublisher returns a publisher made from cfg; the caller closes it.
func newPublisher(t testing.TB, cfg mqtt.PublisherConfig) *mqtt.Publisher {
	t.Helper()
	p, err := mqtt.NewPublisher(&cfg)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return p
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
