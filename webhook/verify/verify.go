// Package verify checks the requests of the webhook publisher on the
// receiving side, for receivers written in Go, as the Standard Webhooks
// specification (https://www.standardwebhooks.com) describes: the
// signatures of the webhook-signature header, HMAC-SHA256 over
// "{webhook-id}.{webhook-timestamp}.{body}", compared in constant time;
// a timestamp within a tolerance of the receiver's clock (the replay
// window); and the event ID, the key to deduplicate by.
//
//	v, err := verify.New("whsec_…")          // several for a key rotation
//	msg, err := v.Message(r.Header, body)     // verified, as an inbox.Message
//	outcome, err := in.Handle(ctx, msg, handle) // once per event ID
//
// Verify checks a request and returns its event ID; Message also decodes
// the outbox's headers (Outbox-Key, Outbox-Type, …) into an inbox.Message
// for an inbox.Inbox, which runs the handler once per event ID in the
// receiver's database transaction. The publisher's Check probes an
// endpoint with a signed HEAD request over an empty body (Webhook-Id
// "outbox-check"), which carries no event: answer it with Verify(h, nil)
// alone — 2xx when it verifies, 401 when not — or 405 when the route
// takes POST only.
//
// The signatures cover the ID, the timestamp and the body only, as the
// specification says, not the other headers: use HTTPS. A request
// replayed within the tolerance verifies again; the inbox, keyed by the
// event ID, turns it into a duplicate.
package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	// HeaderID carries the event ID: the same on every retry, the key to
	// deduplicate by.
	HeaderID = "Webhook-Id"
	// HeaderTimestamp carries the attempt's time, in Unix seconds.
	HeaderTimestamp = "Webhook-Timestamp"
	// HeaderSignature carries the signatures, space-separated, each
	// "v1," + base64 of an HMAC-SHA256.
	HeaderSignature = "Webhook-Signature"
)

// SecretPrefix starts a secret in its serialized form: "whsec_" + base64.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock, either way, by default.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify, wrapped with details (never a secret).
var (
	// ErrMissingHeader: a Standard Webhooks header is missing or empty.
	ErrMissingHeader = errors.New("webhook header missing")
	// ErrTimestamp: the timestamp is not a number, or outside the
	// tolerance (an old request replayed, or a clock far off).
	ErrTimestamp = errors.New("webhook timestamp not acceptable")
	// ErrSignature: no signature matches any secret.
	ErrSignature = errors.New("no webhook signature matches")
	// ErrSecret: a secret is not "whsec_" + base64 (or plain base64).
	ErrSecret = errors.New("webhook secret not valid")
)

// MinSecretLen and MaxSecretLen bound a decoded secret, in bytes: the
// specification asks for 24 to 512 random bytes (192 to 4096 bits).
// ParseSecret refuses a shorter one; a longer one is refused too.
const (
	MinSecretLen = 24
	MaxSecretLen = 512
)

// ParseSecret decodes a secret of the form "whsec_" + standard base64
// (the prefix may be left out). Its error says what is wrong without the
// secret.
func ParseSecret(s string) ([]byte, error) {
	b64 := strings.TrimPrefix(s, SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		if key, err = base64.RawStdEncoding.DecodeString(b64); err != nil {
			return nil, fmt.Errorf("%w: not %s followed by standard base64", ErrSecret, SecretPrefix)
		}
	}
	switch {
	case len(key) < MinSecretLen:
		return nil, fmt.Errorf("%w: %d bytes, want at least %d random bytes", ErrSecret, len(key), MinSecretLen)
	case len(key) > MaxSecretLen:
		return nil, fmt.Errorf("%w: %d bytes, want at most %d", ErrSecret, len(key), MaxSecretLen)
	}
	return key, nil
}

// Signature returns the "v1," signature of a request: base64 of the
// HMAC-SHA256, keyed by key, of id + "." + timestamp (Unix seconds, in
// decimal) + "." + body.
func Signature(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, timestamp, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verifier checks requests against a set of secrets. Set its fields
// before its first use; it is then safe for concurrent use.
type Verifier struct {
	keys [][]byte
	// Tolerance is how far a timestamp may be from Now, either way.
	// Default (zero) DefaultTolerance; negative disables the check (for
	// tests of recorded requests only: it opens the door to replays).
	Tolerance time.Duration
	// Now is the receiver's clock. Default time.Now.
	Now func() time.Time
}

// New returns a Verifier that accepts a signature by any of secrets
// ("whsec_" + base64 each): during a key rotation, the old and the new.
// It fails when there is none or one is not valid; the error does not
// show the secret.
func New(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: verify.New needs at least one secret", ErrSecret)
	}
	v := &Verifier{}
	for i, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d of %d: %w", i+1, len(secrets), err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// Verify checks the Standard Webhooks headers of a request whose body is
// body: a timestamp within Tolerance of Now, and at least one "v1"
// signature made with one of the secrets (compared in constant time;
// signatures of other versions are ignored). It returns the webhook-id,
// the event ID. body must be the bytes as received: a body parsed and
// encoded again does not verify.
func (v *Verifier) Verify(h http.Header, body []byte) (string, error) {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	for _, hv := range [][2]string{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderSignature, sigs}} {
		if hv[1] == "" {
			return "", fmt.Errorf("%w: %s", ErrMissingHeader, hv[0])
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", fmt.Errorf("%w: %s %q is not Unix seconds", ErrTimestamp, HeaderTimestamp, ts)
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	tol := v.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	if tol > 0 {
		at := time.Unix(sec, 0)
		if d := now().Sub(at); d > tol || d < -tol {
			return "", fmt.Errorf("%w: %s %d is %v from now, tolerance %v", ErrTimestamp, HeaderTimestamp, sec, d.Round(time.Second), tol)
		}
	}
	// What was signed is the header's text; the MAC is computed over the
	// parsed number, so the text must be that number's decimal form.
	if strconv.FormatInt(sec, 10) != ts {
		return "", fmt.Errorf("%w: %s %q is not in canonical decimal form", ErrTimestamp, HeaderTimestamp, ts)
	}
	want := make([][]byte, 0, len(v.keys))
	for _, key := range v.keys {
		want = append(want, mac(key, id, sec, body))
	}
	for _, sig := range strings.Fields(sigs) {
		ver, b64, ok := strings.Cut(sig, ",")
		if !ok || ver != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return id, nil
			}
		}
	}
	return "", fmt.Errorf("%w (%s %s: none of its %d signatures is a v1 signature by one of the %d secrets)", ErrSignature, HeaderID, id, len(strings.Fields(sigs)), len(v.keys))
}
