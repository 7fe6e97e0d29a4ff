package sidekiq

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestPayloadArg(t *testing.T) {
	deep := strings.Repeat("[", 98) + strings.Repeat("]", 98)
	for _, c := range []struct {
		name, payload, enc string
	}{
		{"object", `{"order":1, "items": [1,2]}`, EncodingJSON},
		{"scalar", `42`, EncodingJSON},
		{"string", `"hé"`, EncodingJSON},
		{"empty", ``, EncodingBase64},
		{"not JSON", `order 1`, EncodingBase64},
		{"space around", ` {"a":1}`, EncodingBase64},
		{"newline after", "{\"a\":1}\n", EncodingBase64},
		{"invalid UTF-8 in a string", "\"\xff\"", EncodingBase64},
		{"binary", "\x00\x01\xff", EncodingBase64},
		{"98 levels: Ruby parses the job", deep, EncodingJSON},
		{"99 levels: too deep for Ruby's JSON.parse", "[" + deep + "]", EncodingBase64},
	} {
		t.Run(c.name, func(t *testing.T) {
			arg, enc := payloadArg([]byte(c.payload))
			if enc != c.enc {
				t.Fatalf("encoding %s, want %s", enc, c.enc)
			}
			if got := decodeArg(t, arg, enc); got != c.payload {
				t.Errorf("decoded %q, want %q", got, c.payload)
			}
		})
	}
}

// decodeArg is what a consumer does with args[0].
func decodeArg(t testing.TB, arg []byte, enc string) string {
	t.Helper()
	if !json.Valid(arg) {
		t.Fatalf("args[0] %q is not JSON", arg)
	}
	if enc == EncodingJSON {
		return string(arg)
	}
	var s string
	if err := json.Unmarshal(arg, &s); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzPayloadArg: every payload maps to a JSON value that decodes back to
// it, inside a job that is valid JSON.
func FuzzPayloadArg(f *testing.F) {
	for _, s := range []string{`{"a":1}`, ``, `[[[]]]`, "\"\\u00e9\"", `"\"`, "\xff", `{"a":"\\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		arg, enc := payloadArg(p)
		if got := decodeArg(t, arg, enc); got != string(p) {
			t.Fatalf("decoded %q, want %q", got, p)
		}
		if enc == EncodingJSON && jsonDepth(p) > rubyMaxNesting-2 {
			t.Fatalf("depth %d as JSON", jsonDepth(p))
		}
	})
}

func TestJID(t *testing.T) {
	id := uuid.MustParse("01936b2e-1f6a-7cc2-9d4e-5f8a0b1c2d3e")
	got := JID(id)
	// ruby -rdigest -e 'puts Digest::SHA256.hexdigest([ID.delete("-")].pack("H*"))[0, 24]'
	const want = "d45f8fa0695027b6415827cc"
	if got != want {
		t.Fatalf("JID = %q, want %q (Ruby's)", got, want)
	}
	if got != JID(id) {
		t.Fatal("JID is not deterministic")
	}
	if got == JID(uuid.New()) {
		t.Fatal("two IDs, one jid")
	}
}

func TestJSONDepth(t *testing.T) {
	for s, want := range map[string]int{`1`: 0, `[]`: 1, `{"a":[{}]}`: 3, `["[[[", "\"[["]`: 1, `[{"\\":"]"}]`: 2} {
		if got := jsonDepth([]byte(s)); got != want {
			t.Errorf("jsonDepth(%s) = %d, want %d", s, got, want)
		}
	}
}
