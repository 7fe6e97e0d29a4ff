package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/webhook/verify"
)

// Headers of every request besides the message's own; see the package
// documentation.
const (
	HeaderID             = verify.HeaderID        // "Webhook-Id": the event ID
	HeaderTimestamp      = verify.HeaderTimestamp // "Webhook-Timestamp": Unix seconds of the attempt
	HeaderSignature      = verify.HeaderSignature // "Webhook-Signature": "v1,<base64>" per secret
	HeaderTopic          = verify.HeaderTopic
	HeaderTopicBase64    = verify.HeaderTopicBase64
	HeaderKey            = verify.HeaderKey
	HeaderKeyBase64      = verify.HeaderKeyBase64
	HeaderType           = verify.HeaderType
	HeaderTypeBase64     = verify.HeaderTypeBase64
	HeaderCreatedAt      = verify.HeaderCreatedAt
	HeaderIdempotencyKey = "Idempotency-Key" // the event ID again, as HTTP's idempotency-key draft names it
)

// userAgent is the User-Agent of every request, unless a message sets one.
const userAgent = "outbox-webhook"

// errBadHeader: a message header no request can carry as it is.
var errBadHeader = errors.New("header not representable in an HTTP request")

// refusedHeaders are header names HTTP or the publisher gives a meaning
// to: framing, connection management, authentication, and what the
// publisher sets itself. A message with one fails as permanent.
var refusedHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Trailer": true,
	"Te": true, "Connection": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Proxy-Authorization": true, "Upgrade": true, "Expect": true, "Authorization": true,
	"Content-Encoding": true, HeaderIdempotencyKey: true,
}

// refusedPrefixes: the Standard Webhooks headers (the specification owns
// "webhook-") and the outbox's.
var refusedPrefixes = []string{"Webhook-", "Outbox-", "X-Outbox-"}

// checkHeader accepts a header an HTTP request carries unchanged.
func checkHeader(k, v string) error {
	if k == "" {
		return fmt.Errorf("%w: empty name", errBadHeader)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return fmt.Errorf("%w: name %q: only letters, digits and !#$%%&'*+-.^_`|~ are allowed", errBadHeader, k)
		}
	}
	ck := http.CanonicalHeaderKey(k)
	if refusedHeaders[ck] {
		return fmt.Errorf("%w: %s is HTTP's or the publisher's", errBadHeader, ck)
	}
	for _, p := range refusedPrefixes {
		if strings.HasPrefix(ck, p) {
			return fmt.Errorf("%w: names starting with %q are reserved", errBadHeader, p)
		}
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("%w: the value of %s holds a control character", errBadHeader, k)
		}
	}
	if strings.Trim(v, " \t") != v {
		return fmt.Errorf("%w: the value of %s begins or ends with a space or TAB (HTTP trims it)", errBadHeader, k)
	}
	return nil
}

// headers builds the request headers of m, all but the timestamp and the
// signature, with the publisher's content type ct.
func headers(m *outbox.Message, ct string) (http.Header, error) {
	h := make(http.Header, len(m.Headers)+10)
	h["Content-Type"] = []string{ct}
	h["User-Agent"] = []string{userAgent}
	seen := make(map[string]string, len(m.Headers))
	for k, v := range m.Headers {
		if err := checkHeader(k, v); err != nil {
			return nil, err
		}
		ck := http.CanonicalHeaderKey(k)
		if other, dup := seen[ck]; dup {
			return nil, fmt.Errorf("%w: %q and %q differ only in case, and HTTP header names are case-insensitive", errBadHeader, other, k)
		}
		seen[ck] = k
		h[ck] = []string{v}
	}
	id := m.ID.String()
	h[HeaderID] = []string{id}
	h[HeaderIdempotencyKey] = []string{id}
	verify.SetEncoded(h, HeaderTopic, HeaderTopicBase64, m.Topic)
	verify.SetEncoded(h, HeaderKey, HeaderKeyBase64, m.Key)
	verify.SetEncoded(h, HeaderType, HeaderTypeBase64, m.Type)
	if !m.CreatedAt.IsZero() {
		h[HeaderCreatedAt] = []string{m.CreatedAt.UTC().Format(time.RFC3339Nano)}
	}
	return h, nil
}

// sign sets the signature header of a request: one "v1," signature per
// key, space-separated. Without keys it sets nothing.
func sign(h http.Header, keys [][]byte, id string, ts int64, body []byte) {
	if len(keys) == 0 {
		return
	}
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = verify.Signature(k, id, ts, body)
	}
	h[HeaderSignature] = []string{strings.Join(sigs, " ")}
}
