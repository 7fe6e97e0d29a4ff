package verify_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/webhook/verify"
)

// The specification's published test vector (the reference libraries'
// TestWebhookSign): this secret, ID, timestamp and body sign as want.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func specHeader() http.Header {
	h := http.Header{}
	h.Set("webhook-id", specID)
	h.Set("webhook-timestamp", strconv.Itoa(specTimestamp))
	h.Set("webhook-signature", specSignature)
	return h
}

func atSpecTime() time.Time { return time.Unix(specTimestamp, 0) }

func TestSignatureMatchesTheSpecVector(t *testing.T) {
	key, err := verify.ParseSecret(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := verify.Signature(key, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("Signature = %s, want %s", got, specSignature)
	}
	// Without its prefix the secret is the same.
	if k2, err := verify.ParseSecret(strings.TrimPrefix(specSecret, "whsec_")); err != nil || string(k2) != string(key) {
		t.Fatalf("ParseSecret without prefix: %v", err)
	}
}

func TestVerify(t *testing.T) {
	other := "whsec_" + strings.Repeat("QUJD", 8) // 24 bytes of "ABC…"
	for _, c := range []struct {
		name    string
		secrets []string
		edit    func(http.Header)
		now     time.Time
		body    string
		want    error // nil: verifies
	}{
		{name: "spec vector", secrets: []string{specSecret}},
		{name: "rotation: second secret matches", secrets: []string{other, specSecret}},
		{name: "several signatures, one valid", secrets: []string{specSecret}, edit: func(h http.Header) {
			h.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,abc "+specSignature+" v2,xyz")
		}},
		{name: "wrong secret", secrets: []string{other}, want: verify.ErrSignature},
		{name: "body altered", secrets: []string{specSecret}, body: `{"test": 2432232315}`, want: verify.ErrSignature},
		{name: "id altered", secrets: []string{specSecret}, edit: func(h http.Header) { h.Set("webhook-id", specID+"x") }, want: verify.ErrSignature},
		{name: "signature of another version only", secrets: []string{specSecret}, edit: func(h http.Header) {
			h.Set("webhook-signature", strings.Replace(specSignature, "v1,", "v2,", 1))
		}, want: verify.ErrSignature},
		{name: "too old (replay)", secrets: []string{specSecret}, now: atSpecTime().Add(verify.DefaultTolerance + time.Second), want: verify.ErrTimestamp},
		{name: "too far ahead", secrets: []string{specSecret}, now: atSpecTime().Add(-verify.DefaultTolerance - time.Second), want: verify.ErrTimestamp},
		{name: "timestamp not canonical", secrets: []string{specSecret}, edit: func(h http.Header) { h.Set("webhook-timestamp", "0"+strconv.Itoa(specTimestamp)) }, want: verify.ErrTimestamp},
		{name: "timestamp not a number", secrets: []string{specSecret}, edit: func(h http.Header) { h.Set("webhook-timestamp", "soon") }, want: verify.ErrTimestamp},
		{name: "no signature", secrets: []string{specSecret}, edit: func(h http.Header) { h.Del("webhook-signature") }, want: verify.ErrMissingHeader},
		{name: "no id", secrets: []string{specSecret}, edit: func(h http.Header) { h.Del("webhook-id") }, want: verify.ErrMissingHeader},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := verify.New(c.secrets...)
			if err != nil {
				t.Fatal(err)
			}
			now := c.now
			if now.IsZero() {
				now = atSpecTime()
			}
			v.Now = func() time.Time { return now }
			h := specHeader()
			if c.edit != nil {
				c.edit(h)
			}
			body := c.body
			if body == "" {
				body = specBody
			}
			id, err := v.Verify(h, []byte(body))
			switch {
			case c.want == nil && err != nil:
				t.Fatalf("Verify: %v", err)
			case c.want == nil && id != specID:
				t.Fatalf("Verify = %q, want %q", id, specID)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("Verify = %q, %v; want %v", id, err, c.want)
			}
		})
	}
}

// Secrets that are not valid fail New without showing them.
func TestNewRefusesBadSecrets(t *testing.T) {
	for _, s := range []string{"whsec_not*base64!", "whsec_c2hvcnQ=", ""} {
		_, err := verify.New(specSecret, s)
		if !errors.Is(err, verify.ErrSecret) {
			t.Errorf("New(%q): %v, want ErrSecret", s, err)
		}
		if s != "" && strings.Contains(err.Error(), strings.TrimPrefix(s, "whsec_")) {
			t.Errorf("New(%q): %v shows the secret", s, err)
		}
	}
	if _, err := verify.New(); !errors.Is(err, verify.ErrSecret) {
		t.Errorf("New(): %v, want ErrSecret", err)
	}
}

// Message decodes what the publisher's headers carry, hostile keys in
// base64 included, and keeps the other headers.
func TestMessage(t *testing.T) {
	key, _ := verify.ParseSecret(specSecret)
	id := outbox.NewID()
	now := time.Now()
	body := []byte("payload")
	h := http.Header{}
	h.Set("webhook-id", id.String())
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", verify.Signature(key, id.String(), now.Unix(), body))
	verify.SetEncoded(h, verify.HeaderTopic, verify.HeaderTopicBase64, "orders")
	verify.SetEncoded(h, verify.HeaderKey, verify.HeaderKeyBase64, " padded\r\n☃")
	verify.SetEncoded(h, verify.HeaderType, verify.HeaderTypeBase64, "order.placed")
	h.Set(verify.HeaderCreatedAt, "2026-01-02T03:04:05.123456789Z")
	h.Set("Traceparent", "00-abc-def-01")
	h.Set("Content-Type", "application/json")
	if h.Get(verify.HeaderKeyBase64) == "" || h.Get(verify.HeaderKey) != "" {
		t.Fatalf("a hostile key went plain: %v", h)
	}
	v, _ := verify.New(specSecret)
	m, err := v.Message(h, body)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.Topic != "orders" || m.Key != " padded\r\n☃" || m.Type != "order.placed" || string(m.Payload) != "payload" ||
		m.CreatedAt.Nanosecond() != 123456789 || len(m.Headers) != 1 || m.Headers["traceparent"] != "00-abc-def-01" {
		t.Fatalf("Message = %+v", m)
	}
	h.Set(verify.HeaderKeyBase64, "***")
	if _, err := v.Message(h, body); !inbox.IsPermanent(err) {
		t.Fatalf("bad base64: %v, want a permanent error", err)
	}
}
