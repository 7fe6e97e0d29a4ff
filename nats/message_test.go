package nats_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	outboxnats "github.com/outboxgo/outbox/nats"
)

// probeValues are header values to send through NATS as they are: the
// hostile strings, every ASCII byte alone and around a letter, and some
// UTF-8.
func probeValues() []string {
	vs := append([]string{"", " ", "  ", "a", "a b", "\t", "é", "☃ snow", "\u00a0", "\ufeffbom", "\xc2\x85nel"}, hostile.Strings...)
	for c := byte(1); c < 0x80; c++ {
		s := string([]byte{c})
		vs = append(vs, s, "a"+s+"b", s+"a", "a"+s)
	}
	return vs
}

// TestPlainHeaderValue is the probe the encoding rests on: a value
// PlainHeaderValue accepts arrives byte for byte in a NATS header stored
// by JetStream, and one it refuses does not — on the shared server and
// on the in-process one (the server version of go.mod).
func TestPlainHeaderValue(t *testing.T) {
	for name, nc := range map[string]*nats.Conn{"shared": natstest.Connect(t), "in-process": natstest.StartServer(t, "").Connect(t)} {
		t.Run(name, func(t *testing.T) {
			prefix, stream := natstest.NewStream(t, nc)
			js := natstest.JetStream(t, nc)
			vs := probeValues()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, v := range vs {
				m := nats.NewMsg(fmt.Sprintf("%s.p%d", prefix, i))
				m.Header["Probe"] = []string{v}
				if _, err := js.PublishMsg(ctx, m); err != nil {
					t.Fatalf("value %q: %v", v, err)
				}
			}
			got := natstest.WaitForCount(t, js, stream, len(vs), 30*time.Second)
			if len(got) != len(vs) {
				t.Fatalf("read %d messages, want %d", len(got), len(vs))
			}
			for _, m := range got {
				var i int
				if _, err := fmt.Sscanf(strings.TrimPrefix(m.Subject(), prefix+"."), "p%d", &i); err != nil {
					t.Fatal(err)
				}
				v := vs[i]
				same := m.Headers().Get("Probe") == v
				if same != outboxnats.PlainHeaderValue(v) {
					t.Errorf("value %q arrived as %q, but PlainHeaderValue says %v", v, m.Headers().Get("Probe"), outboxnats.PlainHeaderValue(v))
				}
			}
		})
	}
}

// Key and Type go in their plain headers when those carry them unchanged,
// else in the -Base64 ones, never both; KeyAndType reads them back.
func TestKeyAndTypeHeaders(t *testing.T) {
	b := setup(t)
	vals := append([]string{"plain", "with space", "ünïcødé"}, hostile.Strings...)
	var msgs []outbox.Message
	for i, v := range vals {
		m := msg("t")
		m.Key, m.Type = v, v
		if i == 0 {
			m.Key, m.Type = "", "" // neither header
		}
		msgs = append(msgs, m)
	}
	for i, err := range publish(t, b.pub, msgs...) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	got := natstest.WaitForCount(t, b.js, b.stream, len(msgs), 10*time.Second)
	byID := map[string]jetstream.Msg{}
	for _, m := range got {
		byID[m.Headers().Get(outboxnats.HeaderMsgID)] = m
	}
	for _, m := range msgs {
		h := byID[m.ID.String()].Headers()
		key, typ, err := outboxnats.KeyAndType(h)
		if err != nil || key != m.Key || typ != m.Type {
			t.Errorf("key and type %q: KeyAndType = %q, %q, %v", m.Key, key, typ, err)
		}
		_, plain := h[outboxnats.HeaderKey]
		_, enc := h[outboxnats.HeaderKeyBase64]
		switch {
		case m.Key == "" && (plain || enc):
			t.Errorf("empty key: headers %v", h)
		case m.Key != "" && plain == enc:
			t.Errorf("key %q: plain header %v, encoded header %v; want exactly one", m.Key, plain, enc)
		case m.Key != "" && plain != outboxnats.PlainHeaderValue(m.Key):
			t.Errorf("key %q: in the plain header %v", m.Key, plain)
		}
		if _, plainType := h[outboxnats.HeaderType]; m.Type != "" && plainType != outboxnats.PlainHeaderValue(m.Type) {
			t.Errorf("type %q: in the plain header %v", m.Type, plainType)
		}
	}
}

func TestKeyAndTypeRefusesBadEncoding(t *testing.T) {
	for _, h := range []nats.Header{
		{outboxnats.HeaderKeyBase64: {"not base64!"}},
		{outboxnats.HeaderTypeBase64: {"/w=="}}, // 0xff: not UTF-8
	} {
		if _, _, err := outboxnats.KeyAndType(h); err == nil {
			t.Errorf("KeyAndType(%v) succeeded", h)
		}
	}
}

// A message's own header named like one of the publisher's is dropped:
// a consumer can trust Outbox-Key-Base64 to be the publisher's.
func TestOwnHeadersNotSpoofed(t *testing.T) {
	b := setup(t)
	m := msg("t")
	m.Headers = map[string]string{"outbox-key-base64": "c3Bvb2Y=", "Outbox-Type": "spoof"}
	if err := publish(t, b.pub, m)[0]; err != nil {
		t.Fatal(err)
	}
	got := natstest.WaitForCount(t, b.js, b.stream, 1, 10*time.Second)
	h := got[0].Headers()
	if len(h["outbox-key-base64"]) != 0 || len(h[outboxnats.HeaderType]) != 0 {
		t.Fatalf("spoofed headers arrived: %v", h)
	}
}
