package mqtt

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
)

func TestSafeString(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "plain/topic": true, "žluťoučký ☃ 🙂": true, "\u00a0": true, "\u00a0x\u2028": true,
		"a\x00b": false, "\t": false, "\n": false, "\x1f": false, "\x7f": false, "\u0085": false, "\u009f": false,
		"\ufdd0": false, "\ufdef": false, "\ufffe": false, "\uffff": false, "\U0001fffe": false, "\xff": false,
		strings.Repeat("x", 65536): false,
	} {
		if got := safeString(s); got != want {
			t.Errorf("safeString(%q) = %v, want %v", s, got, want)
		}
	}
}

// Every hostile key, type and header value comes back from Properties as
// it went into properties, each property MQTT-safe.
func TestPropertiesRoundTrip(t *testing.T) {
	for _, s := range append(hostile.Strings, "\ufdd0", "\u0085", "a\tb", "") {
		m := outbox.Message{ID: outbox.NewID(), Topic: "t", Key: s, Type: s, Headers: map[string]string{"h": s, "plain": "p"}}
		props, err := properties(&m)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range props {
			if !safeString(p.Key) || !safeString(p.Value) {
				t.Errorf("%q: property %q=%q is not MQTT-safe", s, p.Key, p.Value)
			}
		}
		id, key, typ, _, headers, err := Properties(props)
		if err != nil || id != m.ID.String() || key != s || typ != s || headers["h"] != s || headers["plain"] != "p" || len(headers) != 2 {
			t.Errorf("%q: Properties = %q %q %q %q, %v", s, id, key, typ, headers, err)
		}
	}
}

// packetSize is the size of the packet paho writes.
func TestPacketSize(t *testing.T) {
	for _, n := range []int{0, 1, 100, 16000, 20000, 3 << 20} {
		m := outbox.Message{ID: outbox.NewID(), Topic: "t", Key: "k", Headers: map[string]string{"a": "b"}}
		props, _ := properties(&m)
		pub := &paho.Publish{QoS: 1, Topic: "prefix/t", Payload: make([]byte, n), Properties: &paho.PublishProperties{User: props}}
		var buf bytes.Buffer
		pb := pub.Packet()
		pb.PacketID = 65535
		if _, err := pb.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if got := packetSize(pub); got != uint64(buf.Len()) {
			t.Errorf("payload %d: packetSize %d, written %d", n, got, buf.Len())
		}
	}
}

// A header value too long for an MQTT string fails: paho would frame it
// with a wrong length.
func TestPropertiesTooLong(t *testing.T) {
	for _, v := range []string{strings.Repeat("x", 65536), strings.Repeat("\t", 50000)} {
		m := outbox.Message{ID: outbox.NewID(), Topic: "t", Headers: map[string]string{"h": v}}
		if _, err := properties(&m); err == nil {
			t.Errorf("a header value of %d bytes: no error", len(v))
		}
	}
}
