package sidekiq

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
)

// Encodings of the payload in args[0], named by Meta.Encoding.
const (
	// EncodingJSON: args[0] is the payload itself, a JSON value (a Ruby
	// job receives it parsed: a Hash, an Array, a String, …), its bytes as
	// enqueued.
	EncodingJSON = "json"
	// EncodingBase64: args[0] is a string, the payload in standard base64
	// with padding (Ruby: Base64.strict_decode64).
	EncodingBase64 = "base64"
)

// rubyMaxNesting is the deepest nesting Ruby's JSON.parse takes by
// default (max_nesting: 100), which Sidekiq's load_json uses; a job is
// two levels (the job's object, args) above its payload.
const rubyMaxNesting = 100

// Meta is args[1] of every job: the event's identity and envelope. Its
// JSON keys are the field tags; every key is present (Key and Type "" when
// none, Headers {} when none).
type Meta struct {
	// ID is the event ID (a UUID, as text): the consumer's dedup key,
	// beside the jid derived from it.
	ID string `json:"id"`
	// Topic, Key and Type are the message's.
	Topic string `json:"topic"`
	Key   string `json:"key"`
	Type  string `json:"type"`
	// Headers are the message's headers.
	Headers map[string]string `json:"headers"`
	// Encoding says how args[0] holds the payload: EncodingJSON or
	// EncodingBase64.
	Encoding string `json:"encoding"`
}

// JID returns the Sidekiq job ID ("jid") of the event id: the first 24
// hex digits (12 bytes, the size of Sidekiq's own SecureRandom.hex(12))
// of the SHA-256 of the ID's 16 bytes. The same event always gets the same
// jid, so a job pushed again (a relay that died between Redis's reply and
// marking the event) carries the jid of the first push. In Ruby:
//
//	Digest::SHA256.hexdigest([event_id.delete("-")].pack("H*"))[0, 24]
func JID(id uuid.UUID) string {
	sum := sha256.Sum256(id[:])
	return hex.EncodeToString(sum[:12])
}

// payloadArg is args[0] of a job for payload p, as JSON, and its
// encoding: p itself when it is one JSON value that Sidekiq can parse
// back (valid UTF-8, no whitespace around it, nested shallowly enough for
// Ruby's JSON.parse), else p in base64. Every payload maps.
func payloadArg(p []byte) ([]byte, string) {
	if len(p) > 0 && !isJSONSpace(p[0]) && !isJSONSpace(p[len(p)-1]) &&
		utf8.Valid(p) && jsonDepth(p) <= rubyMaxNesting-2 && json.Valid(p) {
		return p, EncodingJSON
	}
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(p))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, p)
	return append(out, '"'), EncodingBase64
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonDepth is the deepest nesting of arrays and objects in the valid
// JSON b (0 for a scalar).
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// encodeJob is the JSON of m's job, as Sidekiq's client writes it:
// class, args, queue, jid, retry, created_at, and enqueued_at unless the
// job is scheduled (enqueued is zero); Sidekiq's poller sets it when it
// moves the job to its queue.
func encodeJob(m *outbox.Message, t target, now, enqueued time.Time) ([]byte, error) {
	arg, enc := payloadArg(m.Payload)
	headers := m.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	meta, err := marshal(Meta{ID: m.ID.String(), Topic: m.Topic, Key: m.Key, Type: m.Type, Headers: headers, Encoding: enc})
	if err != nil {
		return nil, err
	}
	created := m.CreatedAt
	if created.IsZero() {
		created = now
	}
	class, queue := t.classJSON, t.queueJSON
	var b bytes.Buffer
	b.Grow(len(arg) + len(meta) + len(class) + len(queue) + 160)
	b.WriteString(`{"class":`)
	b.Write(class)
	b.WriteString(`,"args":[`)
	b.Write(arg)
	b.WriteByte(',')
	b.Write(meta)
	b.WriteString(`],"queue":`)
	b.Write(queue)
	b.WriteString(`,"jid":"`)
	b.WriteString(JID(m.ID))
	b.WriteString(`","retry":`)
	b.Write(t.retry)
	b.WriteString(`,"created_at":`)
	b.WriteString(seconds(created))
	if !enqueued.IsZero() {
		b.WriteString(`,"enqueued_at":`)
		b.WriteString(seconds(enqueued))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping (Ruby's JSON.generate
// does none either), without the trailing newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// seconds is t as Sidekiq's timestamps: Unix seconds as a float
// (Ruby's Time#to_f).
func seconds(t time.Time) string {
	return strconv.FormatFloat(unixSeconds(t), 'f', -1, 64)
}

func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
