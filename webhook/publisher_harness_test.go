package webhook_test

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/webhook"
)

// testMaxPayload is the largest body the suite's receivers take (they
// answer 413 above it).
const testMaxPayload = 64 << 10

// Basic authentication every receiver of the suite requires.
const (
	testUser = "relay"
	testPass = "S3cret-pass"
)

// loopback is the allowance the tests' publishers need: the receivers
// listen on 127.0.0.1, which the SSRF guard refuses by default.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// suiteReceiver is a receiver as the suite's environments use it.
func suiteReceiver(t *testing.T) (*receiver, string) {
	secret := newSecret()
	r := newReceiver(t, secret)
	r.user, r.pass, r.maxPayload = testUser, testPass, testMaxPayload
	return r, secret
}

var pubHarness = publishertest.Harness{
	Setup: func(t *testing.T) publishertest.Env {
		r, secret := suiteReceiver(t)
		return pubEnv(r, strings.TrimPrefix(r.URL, "http://"), secret)
	},
	Outage: func(t *testing.T) publishertest.Outage {
		r, secret := suiteReceiver(t)
		px := tcpproxy.Start(t, strings.TrimPrefix(r.URL, "http://"))
		return publishertest.Outage{
			Env:   pubEnv(r, px.Addr, secret),
			Stop:  func(*testing.T) { px.Cut() },
			Start: func(t *testing.T) { px.Restore(t) },
		}
	},
	Refusals: []publishertest.Refusal{
		{Name: "wrong signing secret", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return newFromURL(env, testUser+":"+testPass, "secret="+url.QueryEscape(newSecret())+"&allow_cidr=127.0.0.1/32")
		}},
		{Name: "wrong password", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return newFromURL(env, testUser+":wrong", "secret="+url.QueryEscape(envSecret(env))+"&allow_cidr=127.0.0.1/32")
		}},
		{Name: "loopback not allowed (SSRF guard)", New: func(t *testing.T, env publishertest.Env) (publishers.Publisher, error) {
			return newFromURL(env, testUser+":"+testPass, "secret="+url.QueryEscape(envSecret(env)))
		}},
	},
}

// The environments remember their receiver's address and secret for the
// refusals, which build publishers from URLs.
var envs = struct {
	addr, secret map[string]string // by topic
}{map[string]string{}, map[string]string{}}

var envsMu = make(chan struct{}, 1)

func remember(topic, addr, secret string) {
	envsMu <- struct{}{}
	envs.addr[topic], envs.secret[topic] = addr, secret
	<-envsMu
}

func envAddr(env publishertest.Env) string {
	envsMu <- struct{}{}
	defer func() { <-envsMu }()
	return envs.addr[env.Topic]
}

func envSecret(env publishertest.Env) string {
	envsMu <- struct{}{}
	defer func() { <-envsMu }()
	return envs.secret[env.Topic]
}

// newFromURL is a publisher as the CLI makes one, from a URL, to env's
// receiver with user-info userinfo and the query query.
func newFromURL(env publishertest.Env, userinfo, query string) (publishers.Publisher, error) {
	cfg, err := webhook.ConfigFromURL(fmt.Sprintf("webhook+http://%s@%s/hooks/{topic}?timeout=5s&%s", userinfo, envAddr(env), query))
	if err != nil {
		return nil, err
	}
	p, err := webhook.New(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pubEnv is the suite's Env: publishers posting to addr (the receiver's,
// or a proxy's in front of it) with Basic authentication and secret, read
// back from what r stored. The receiver keeps every POST: no Dedup.
func pubEnv(r *receiver, addr, secret string) publishertest.Env {
	topic := fmt.Sprintf("events-%d", seq.Add(1))
	remember(topic, addr, secret)
	return publishertest.Env{
		NewPublisher: func(t *testing.T) publishers.Publisher {
			p, err := webhook.New(&webhook.Config{
				Endpoint:   "http://" + testUser + ":" + testPass + "@" + addr + "/hooks/{topic}",
				Secrets:    []string{secret},
				Timeout:    5 * time.Second,
				AllowCIDRs: loopback,
			})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return p
		},
		Topic: topic,
		Read: func(_ *testing.T, n int, timeout time.Duration) []publishertest.Received {
			return r.read(topic, n, timeout)
		},
		MaxPayload: testMaxPayload,
	}
}

func TestPublisherConformance(t *testing.T) {
	publishertest.Run(t, pubHarness)
}
