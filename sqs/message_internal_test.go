package sqs

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// TestEncodeAttributeLimit: however many headers, at most 10 attributes;
// the headers that do not fit, or cannot be attributes, travel in
// outbox-headers, and Decode gives every header back.
func TestEncodeAttributeLimit(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 7, 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "k", Type: "T", Payload: []byte("p"),
				CreatedAt: time.Now().UTC(), Headers: map[string]string{}}
			for i := range n {
				m.Headers[fmt.Sprintf("h%02d", i)] = fmt.Sprint(i)
			}
			if n > 0 {
				m.Headers["bad:name"] = "x" // not an attribute name
				m.Headers["empty"] = ""     // SQS refuses an empty value
			}
			enc, err := encodeMessage(&m)
			if err != nil {
				t.Fatal(err)
			}
			if len(enc.attrs) > MaxAttributes {
				t.Fatalf("%d attributes", len(enc.attrs))
			}
			_, overflow := enc.attrs[AttrHeaders]
			if want := n > 0; overflow != want {
				t.Fatalf("outbox-headers present %v, want %v: %v", overflow, want, enc.attrs)
			}
			got, err := Decode("t", enc.body, enc.attrs, 1)
			if err != nil {
				t.Fatal(err)
			}
			want := m.Headers
			if len(want) == 0 {
				want = nil
			}
			if !maps.Equal(got.Headers, want) || got.ID != m.ID || got.Key != "k" || got.Type != "T" || !got.CreatedAt.Equal(m.CreatedAt) {
				t.Fatalf("decoded %+v, want %+v", got, m)
			}
		})
	}
}

// TestEncodeBody: text goes as it is, other bytes in base64, an empty
// payload as BodyEmpty; control characters in the key go as a Binary
// attribute.
func TestEncodeBody(t *testing.T) {
	for _, p := range [][]byte{nil, []byte("plain"), {0, 1, 0xff}, []byte("esc \x1b"), []byte("☃")} {
		m := outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "\x1b[31mred", Payload: p}
		enc, err := encodeMessage(&m)
		if err != nil {
			t.Fatal(err)
		}
		if !validText(enc.body) || enc.body == "" {
			t.Fatalf("payload %q: body %q is not text SQS takes", p, enc.body)
		}
		if aws.ToString(enc.attrs[AttrKey].DataType) != "Binary" {
			t.Fatalf("key attribute %+v, want Binary", enc.attrs[AttrKey])
		}
		got, err := Decode("t", enc.body, enc.attrs, 1)
		if err != nil || string(got.Payload) != string(p) || got.Key != m.Key {
			t.Fatalf("payload %q: decoded %q key %q, %v", p, got.Payload, got.Key, err)
		}
	}
}

func TestGroupID(t *testing.T) {
	long := strings.Repeat("k", 129)
	for key, want := range map[string]string{
		"order-1":                  "order-1",
		strings.Repeat("k", 128):   strings.Repeat("k", 128),
		long:                       "sha256-",
		"with space":               "sha256-",
		"žluť":                     "sha256-",
		"!\"#$%&'()*+,-./:;<=>?@[": "!\"#$%&'()*+,-./:;<=>?@[",
	} {
		got := GroupID(key)
		hashed := want == "sha256-" && strings.HasPrefix(got, want) && len(got) == 71
		if got != want && !hashed {
			t.Errorf("GroupID(%q) = %q, want %q…", key, got, want)
		}
		if GroupID(key) != got {
			t.Errorf("GroupID(%q) is not deterministic", key)
		}
	}
	if GroupID("a b") == GroupID("a  b") {
		t.Error("two keys share a group")
	}
}

func TestDecodeRefuses(t *testing.T) {
	str := func(v string) types.MessageAttributeValue {
		return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	for name, attrs := range map[string]map[string]types.MessageAttributeValue{
		"no ID":          {},
		"ID not a UUID":  {AttrID: str("nope")},
		"bad encoding":   {AttrID: str(outbox.NewID().String()), AttrBodyEncoding: str("rot13")},
		"bad headers":    {AttrID: str(outbox.NewID().String()), AttrHeaders: str("{")},
		"bad created at": {AttrID: str(outbox.NewID().String()), AttrCreatedAt: str("yesterday")},
	} {
		if _, err := Decode("t", "body", attrs, 1); !inbox.IsPermanent(err) {
			t.Errorf("%s: Decode = %v, want a permanent error", name, err)
		}
	}
}
