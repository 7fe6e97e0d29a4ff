package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/webhook"
)

// newPub returns a publisher of cfg, with the loopback allowance unless
// cfg has an allowance of its own, closed at cleanup.
func newPub(t *testing.T, cfg webhook.Config) *webhook.Publisher {
	t.Helper()
	if cfg.AllowCIDRs == nil && !cfg.AllowPrivate {
		cfg.AllowCIDRs = loopback
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	p, err := webhook.New(&cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// msg returns a message to topic with a payload.
func msg(topic, key string) outbox.Message {
	return outbox.Message{ID: outbox.NewID(), Topic: topic, Key: key, Type: "Test",
		Payload: []byte(`{"n":1}`), CreatedAt: time.Now().UTC()}
}

// publishOne publishes one message and returns its error.
func publishOne(t *testing.T, p publishers.Publisher, m outbox.Message) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := p.Publish(ctx, []outbox.Message{m})
	if len(errs) != 1 {
		t.Fatalf("%d results for 1 message", len(errs))
	}
	return errs[0]
}

// plain fails the test unless err is a plain (retryable) error.
func plain(t *testing.T, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatal("nil error")
	case publishers.IsPermanent(err), publishers.IsMisconfigured(err), publishers.IsUnavailable(err):
		t.Fatalf("%v: want a plain error, retried with backoff", err)
	}
}

// server starts an httptest server of h, closed at cleanup.
func server(t *testing.T, h http.HandlerFunc) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// The signature on the wire, checked with the specification's algorithm
// written in the test: with two secrets (a key rotation) there are two
// signatures, each valid; the ID is the event's, the timestamp the
// publisher's clock's.
func TestSignatureOnTheWire(t *testing.T) {
	oldS, newS := newSecret(), newSecret()
	at := time.Unix(1_700_000_000, 0)
	got := make(chan http.Header, 1)
	var body []byte
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		got <- r.Header.Clone()
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL + "/in", Secrets: []string{newS, oldS}, Clock: fixedClock{at}})
	m := msg("orders", "k")
	if err := publishOne(t, p, m); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("webhook-id") != m.ID.String() || h.Get("webhook-timestamp") != "1700000000" {
		t.Fatalf("webhook-id %q, webhook-timestamp %q", h.Get("webhook-id"), h.Get("webhook-timestamp"))
	}
	sigs := strings.Split(h.Get("webhook-signature"), " ")
	want := []string{specSignature(newS, m.ID.String(), "1700000000", body), specSignature(oldS, m.ID.String(), "1700000000", body)}
	if len(sigs) != 2 || sigs[0] != want[0] || sigs[1] != want[1] {
		t.Fatalf("webhook-signature %q, want %q", sigs, want)
	}
	if string(body) != string(m.Payload) || h.Get("Outbox-Key") != "k" || h.Get("Outbox-Type") != "Test" || h.Get("Outbox-Topic") != "orders" {
		t.Fatalf("body %q, headers %v", body, h)
	}
}

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// A receiver slower than the timeout: the message is not acknowledged,
// and the failure is retryable (unavailable), never permanent.
func TestSlowReceiverTimesOut(t *testing.T) {
	release := make(chan struct{})
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}, Timeout: 200 * time.Millisecond})
	start := time.Now()
	err := publishOne(t, p, msg("slow", ""))
	if !publishers.IsUnavailable(err) || publishers.IsPermanent(err) {
		t.Fatalf("%v: want an error classified Unavailable", err)
	}
	if !strings.Contains(err.Error(), "timed out") {
		t.Errorf("%v: want it to say it timed out", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// 500, then 200: the first attempt fails retryably, with the status and
// the body in the error; the retry succeeds.
func TestServerErrorThenSuccess(t *testing.T) {
	var n atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			http.Error(w, "database is down", http.StatusInternalServerError)
		}
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	m := msg("flaky", "k")
	err := publishOne(t, p, m)
	plain(t, err)
	if !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "database is down") {
		t.Errorf("%v: want the status and the body", err)
	}
	if err := publishOne(t, p, m); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d requests, want 2", n.Load())
	}
}

// 410 Gone: permanent, with the status and the first 256 bytes of the
// body, not more.
func TestGoneIsPermanent(t *testing.T) {
	long := "gone for good: " + strings.Repeat("x", 1000)
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, long)
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	err := publishOne(t, p, msg("gone", ""))
	if !publishers.IsPermanent(err) {
		t.Fatalf("%v: want Permanent", err)
	}
	var se *webhook.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusGone {
		t.Fatalf("%v: want a StatusError 410", err)
	}
	if !strings.Contains(err.Error(), "410") || !strings.Contains(err.Error(), long[:200]) || strings.Contains(err.Error(), long[:300]) {
		t.Fatalf("%v: want 410 and the first 256 bytes of the body", err)
	}
}

// 429 with Retry-After: retryable, the delay in the error, one request.
func TestTooManyRequestsKeepsRetryAfter(t *testing.T) {
	var n atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	err := publishOne(t, p, msg("busy", ""))
	plain(t, err)
	var se *webhook.StatusError
	if !errors.As(err, &se) || se.RetryAfter != 30*time.Second || !strings.Contains(err.Error(), "Retry-After 30s") {
		t.Fatalf("%v: want 429 with Retry-After 30s", err)
	}
	if d, ok := publishers.RetryDelay(err); !ok || d != 30*time.Second {
		t.Fatalf("RetryDelay = %v, %v: the relay would retry before the receiver's Retry-After", d, ok)
	}
	if n.Load() != 1 {
		t.Fatalf("%d requests, want 1: the publisher does not retry by itself", n.Load())
	}
}

// A redirect is not followed: permanent, naming its Location, and the
// target receives nothing.
func TestRedirectNotFollowed(t *testing.T) {
	var reached atomic.Int64
	target := server(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	err := publishOne(t, p, msg("moved", ""))
	if !publishers.IsPermanent(err) || !strings.Contains(err.Error(), target.URL+"/moved") {
		t.Fatalf("%v: want Permanent naming the Location", err)
	}
	if reached.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

// Without an allowance, a post to 127.0.0.1 — by address or by a name that
// resolves to it — is refused as misconfigured and nothing arrives; Check
// says so too.
func TestSSRFGuardRefusesLoopback(t *testing.T) {
	var reached atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "http://"))
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			p, err := webhook.New(&webhook.Config{Endpoint: "http://" + host + ":" + port + "/in", Secrets: []string{newSecret()}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			err = publishOne(t, p, msg("ssrf", "k"))
			if !publishers.IsMisconfigured(err) || !errors.Is(err, webhook.ErrForbiddenAddress) {
				t.Fatalf("%v: want Misconfigured, ErrForbiddenAddress", err)
			}
			if err := p.Check(context.Background()); !publishers.IsMisconfigured(err) {
				t.Fatalf("Check: %v: want Misconfigured", err)
			}
		})
	}
	if reached.Load() != 0 {
		t.Fatalf("%d requests arrived", reached.Load())
	}
}

// One Publish call's messages go out concurrently, at most MaxInFlight
// at a time to one host.
func TestMaxInFlight(t *testing.T) {
	const limit, n = 3, 30
	var inFlight, peak atomic.Int64
	full := make(chan struct{})
	var once sync.Once
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			old := peak.Load()
			if now <= old || peak.CompareAndSwap(old, now) {
				break
			}
		}
		if now == limit {
			once.Do(func() { close(full) })
		}
		select { // hold the first requests until the limit is reached
		case <-full:
		case <-time.After(10 * time.Second):
		}
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}, MaxInFlight: limit, Timeout: 20 * time.Second})
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = msg("fan", "")
	}
	for i, err := range p.Publish(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	select {
	case <-full:
	default:
		t.Fatalf("never %d requests in flight at once (peak %d)", limit, peak.Load())
	}
	if peak.Load() > limit {
		t.Fatalf("peak %d requests in flight, limit %d", peak.Load(), limit)
	}
}

// The messages of one key go one at a time, in batch order; after a
// retryable failure the later ones of that key are not sent.
func TestOneKeyOneInFlight(t *testing.T) {
	var mu sync.Mutex
	var order []string
	var inFlight, peak atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) {
		if now := inFlight.Add(1); now > peak.Load() {
			peak.Store(now)
		}
		defer inFlight.Add(-1)
		mu.Lock()
		order = append(order, r.Header.Get("webhook-id"))
		mu.Unlock()
		if r.Header.Get("fail") != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	msgs := make([]outbox.Message, 10)
	for i := range msgs {
		msgs[i] = msg("ordered", "one-key")
	}
	msgs[6].Headers = map[string]string{"fail": "yes"}
	errs := p.Publish(context.Background(), msgs)
	for i, err := range errs {
		switch {
		case i < 6 && err != nil:
			t.Errorf("message %d: %v", i, err)
		case i >= 6 && err == nil:
			t.Errorf("message %d: nil error after the failure of message 6", i)
		case i > 6 && publishers.IsPermanent(err):
			t.Errorf("message %d: %v: a message not sent is not permanent", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 7 || peak.Load() != 1 {
		t.Fatalf("%d requests (want 7), peak in flight %d (want 1)", len(order), peak.Load())
	}
	for i, id := range order {
		if id != msgs[i].ID.String() {
			t.Fatalf("request %d was message %s, want %s", i, id, msgs[i].ID)
		}
	}
}

// Connections are reused: many calls open at most MaxInFlight
// connections.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}, MaxInFlight: 2})
	for range 50 {
		if err := publishOne(t, p, msg("reuse", "")); err != nil {
			t.Fatal(err)
		}
	}
	if conns.Load() > 2 {
		t.Fatalf("%d connections for 50 sequential requests", conns.Load())
	}
}

// Check sends only a HEAD probe: nothing is stored.
func TestCheckHasNoSideEffects(t *testing.T) {
	r, secret := suiteReceiver(t)
	p := newPub(t, webhook.Config{Endpoint: "http://" + testUser + ":" + testPass + "@" + strings.TrimPrefix(r.URL, "http://") + "/hooks/{topic}",
		Secrets: []string{secret}})
	if err := p.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.heads.Load() != 1 || r.posts.Load() != 0 {
		t.Fatalf("%d HEAD, %d POST; want one HEAD only", r.heads.Load(), r.posts.Load())
	}
}

// A message header HTTP gives a meaning to fails as permanent, unsent.
func TestReservedHeaderIsPermanent(t *testing.T) {
	var reached atomic.Int64
	s := server(t, func(w http.ResponseWriter, r *http.Request) { reached.Add(1) })
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	for _, h := range []map[string]string{{"Content-Length": "1"}, {"webhook-id": "x"}, {"a": "1", "A": "2"}} {
		m := msg("hdr", "")
		m.Headers = h
		if err := publishOne(t, p, m); !publishers.IsPermanent(err) {
			t.Errorf("headers %v: %v: want Permanent", h, err)
		}
	}
	if reached.Load() != 0 {
		t.Fatalf("%d requests arrived", reached.Load())
	}
}

// A topic without an endpoint is misconfigured; Endpoints route topics.
func TestEndpointsPerTopic(t *testing.T) {
	got := make(chan string, 2)
	s := server(t, func(w http.ResponseWriter, r *http.Request) { got <- r.URL.Path })
	p := newPub(t, webhook.Config{Endpoints: map[string]string{"a": s.URL + "/only-a", "b/c": s.URL + "/t/{topic}"},
		Secrets: []string{newSecret()}})
	for _, topic := range []string{"a", "b/c"} {
		if err := publishOne(t, p, msg(topic, "")); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := <-got, <-got; a != "/only-a" || b != "/t/b/c" {
		t.Fatalf("paths %q %q", a, b)
	}
	err := publishOne(t, p, msg("elsewhere", ""))
	if !publishers.IsMisconfigured(err) || !errors.Is(err, webhook.ErrNoEndpoint) {
		t.Fatalf("%v: want Misconfigured, ErrNoEndpoint", err)
	}
}

// An https endpoint whose certificate does not verify is misconfigured;
// with its CA in Config.TLS it takes the message.
func TestTLS(t *testing.T) {
	var reached atomic.Int64
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	t.Cleanup(s.Close)
	p := newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}})
	if err := publishOne(t, p, msg("tls", "")); !publishers.IsMisconfigured(err) {
		t.Fatalf("untrusted certificate: %v: want Misconfigured", err)
	}
	trusted := s.Client().Transport.(*http.Transport).TLSClientConfig
	p = newPub(t, webhook.Config{Endpoint: s.URL, Secrets: []string{newSecret()}, TLS: trusted})
	if err := publishOne(t, p, msg("tls", "")); err != nil {
		t.Fatal(err)
	}
	if reached.Load() != 1 {
		t.Fatalf("%d requests arrived, want 1", reached.Load())
	}
}
