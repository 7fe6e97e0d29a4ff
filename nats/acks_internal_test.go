package nats

import (
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// parseAck agrees with encoding/json on every acknowledgement it accepts,
// and leaves every other form to it.
func TestParseAckAgreesWithJSON(t *testing.T) {
	cases := []struct {
		in     string
		wantOK bool
	}{
		{`{"stream":"orders","seq":1}`, true},
		{`{"stream":"obb_1a2b","seq":18446744073709551615}`, true},
		{`{"stream":"orders","seq":42,"duplicate":true}`, true},
		{`{"stream":"orders", "seq":1}`, true},                    // nats-server 2.9
		{`{"stream":"orders", "seq":42,"duplicate": true}`, true}, // nats-server 2.9
		{`{"stream": "orders",  "seq": 7 ,"duplicate": true}`, false},
		{`{"stream":"orders","seq":7,"duplicate":true }`, false},
		{`{"stream":"orders","domain":"hub","seq":1}`, false},
		{`{"stream":"ord\"ers","seq":1}`, false},
		{`{"stream":"orders","seq":01}`, false},
		{`{"stream":"orders","seq":18446744073709551616}`, false},
		{`{"stream":"orders","seq":1,"duplicate":false}`, false},
		{`{"stream":"","seq":1}`, false},
		{`{"error":{"code":503,"description":"no responders"}}`, false},
		{`{"stream":"orders","seq":1} `, false},
	}
	for _, c := range cases {
		stream, seq, dup, ok := parseAck([]byte(c.in))
		if ok != c.wantOK {
			t.Errorf("%s: ok = %v, want %v", c.in, ok, c.wantOK)
			continue
		}
		if !ok {
			continue
		}
		var want jetstream.PubAck
		if err := json.Unmarshal([]byte(c.in), &want); err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if stream != want.Stream || seq != want.Sequence || dup != want.Duplicate {
			t.Errorf("%s: got %q %d %v, json says %q %d %v", c.in, stream, seq, dup, want.Stream, want.Sequence, want.Duplicate)
		}
	}
}

func FuzzParseAck(f *testing.F) {
	f.Add([]byte(`{"stream":"orders","seq":1}`))
	f.Add([]byte(`{"stream":"orders","seq":42,"duplicate":true}`))
	f.Add([]byte(`{"stream":"orders", "seq":42,"duplicate": true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		stream, seq, dup, ok := parseAck(b)
		if !ok {
			return
		}
		var want jetstream.PubAck
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%q accepted, but json says %v", b, err)
		}
		if stream != want.Stream || seq != want.Sequence || dup != want.Duplicate {
			t.Fatalf("%q: got %q %d %v, json says %q %d %v", b, stream, seq, dup, want.Stream, want.Sequence, want.Duplicate)
		}
	})
}
