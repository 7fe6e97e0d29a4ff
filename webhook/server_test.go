package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxgo/outbox/publishers/publishertest"
	"github.com/outboxgo/outbox/webhook/verify"
)

// receiver is a webhook receiver for the tests: an httptest server that
// checks Basic authentication and every signature (with package verify,
// and again with specSignature, written from the specification), answers
// 413 above maxPayload, and stores what it accepted per topic.
type receiver struct {
	*httptest.Server
	secrets    []string
	user, pass string // required Basic authentication, when user != ""
	maxPayload int

	verifier *verify.Verifier
	heads    atomic.Int64 // HEAD probes answered
	posts    atomic.Int64 // POSTs received, accepted or not

	mu      sync.Mutex
	got     map[string][]publishertest.Received
	changed chan struct{} // closed and replaced at every store
}

// newReceiver starts a receiver, closed at cleanup.
func newReceiver(t testing.TB, secrets ...string) *receiver {
	t.Helper()
	r := &receiver{secrets: secrets, got: map[string][]publishertest.Received{}, changed: make(chan struct{})}
	if len(secrets) > 0 {
		v, err := verify.New(secrets...)
		if err != nil {
			t.Fatal(err)
		}
		r.verifier = v
	}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method == http.MethodPost {
		r.posts.Add(1)
	}
	if r.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, int64(max(r.maxPayload, 1<<20))+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if r.maxPayload > 0 && len(body) > r.maxPayload {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	if r.verifier == nil {
		http.Error(w, "no secret configured", http.StatusInternalServerError)
		return
	}
	if !r.specVerified(req.Header, body) {
		http.Error(w, "no valid signature", http.StatusUnauthorized)
		return
	}
	switch req.Method {
	case http.MethodHead: // Check's probe: verified, and nothing else
		if _, err := r.verifier.Verify(req.Header, body); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		r.heads.Add(1)
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPost:
	default:
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	m, err := r.verifier.Message(req.Header, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	r.got[m.Topic] = append(r.got[m.Topic], publishertest.Received{
		ID: m.ID.String(), Key: m.Key, Type: m.Type, Headers: maps.Clone(m.Headers), Payload: body, Topic: m.Topic,
	})
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// specVerified checks the request as the specification describes, without
// package verify: some "v1," signature is base64 of the HMAC-SHA256 of
// "id.timestamp.body" under the base64-decoded secret after "whsec_".
func (r *receiver) specVerified(h http.Header, body []byte) bool {
	for _, s := range r.secrets {
		want := specSignature(s, h.Get("webhook-id"), h.Get("webhook-timestamp"), body)
		for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
			if hmac.Equal([]byte(sig), []byte(want)) {
				return true
			}
		}
	}
	return false
}

// specSignature is the specification's signature, computed independently
// of the package under test.
func specSignature(secret, id, timestamp string, body []byte) string {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		panic(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// read returns what the receiver stored for topic, waiting until there
// are n or timeout passes.
func (r *receiver) read(topic string, n int, timeout time.Duration) []publishertest.Received {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, ch := r.got[topic], r.changed
		if len(got) >= n {
			out := append([]publishertest.Received(nil), got...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			return append([]publishertest.Received(nil), r.got[topic]...)
		}
	}
}
