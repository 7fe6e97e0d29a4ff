package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
	"github.com/outboxgo/outbox/internal/logtest"
)

type captureDriver struct{ got []outbox.Message }

func (d *captureDriver) InsertTx(_ context.Context, _ struct{}, msgs []outbox.Message) error {
	d.got = append(d.got, msgs...)
	return nil
}

func TestEnqueueValidates(t *testing.T) {
	d := &captureDriver{}
	ob := outbox.New(d, &outbox.Config{MaxPayload: 10})
	ctx := context.Background()
	for _, c := range []struct {
		m    outbox.Message
		want string
	}{
		{outbox.Message{}, "empty topic"},
		{outbox.Message{Topic: strings.Repeat("t", 256)}, "topic is 256 bytes"},
		{outbox.Message{Topic: "t", Key: strings.Repeat("k", 256)}, "key is 256 bytes"},
		{outbox.Message{Topic: "t", Key: "\xff"}, "key is not valid UTF-8"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": "\xff"}}, `header "h"`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"": "v"}}, `header ""`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": "a\r\nInjected: 1"}}, `header "h"`},
		{outbox.Message{Topic: "t", Payload: make([]byte, 11)}, "payload is 11 bytes, limit 10"},
		// NUL: PostgreSQL's text cannot hold it, so no store takes it.
		{outbox.Message{Topic: "t\x00"}, "topic holds a NUL byte"},
		{outbox.Message{Topic: "t", Key: "k\x00"}, "key holds a NUL byte"},
		{outbox.Message{Topic: "t", Type: "\x00"}, "type holds a NUL byte"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": "a\x00b"}}, "control character"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h\x00": "v"}}, "outside RFC 9110's token"},
		// Names are tokens; values are field values (RFC 9110).
		{outbox.Message{Topic: "t", Headers: map[string]string{"two words": "v"}}, "outside RFC 9110's token"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"a:b": "v"}}, "outside RFC 9110's token"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"a/b": "v"}}, "outside RFC 9110's token"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"clé": "v"}}, "outside RFC 9110's token"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": " padded"}}, "begins or ends"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": "padded\t"}}, "begins or ends"},
		{outbox.Message{Topic: "t", Headers: map[string]string{"h": "esc\x1b[31m"}}, "control character"},
		// The outbox's own header names are reserved, in any case.
		{outbox.Message{Topic: "t", Headers: map[string]string{"Outbox-Key": "forged"}}, `reserved`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"outbox-type": "x"}}, `reserved`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"X-Outbox-Deliveries": "1"}}, `reserved`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"Nats-Msg-Id": "x"}}, `reserved`},
		{outbox.Message{Topic: "t", Headers: map[string]string{"nats-expected-stream": "x"}}, `reserved`},
	} {
		err := ob.Enqueue(ctx, struct{}{}, c.m)
		if !errors.Is(err, outbox.ErrInvalidMessage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Enqueue(%+v) = %v, want ErrInvalidMessage mentioning %q", c.m, err, c.want)
		}
	}
	if len(d.got) != 0 {
		t.Fatalf("invalid messages reached the driver: %d", len(d.got))
	}
}

// TestEnqueueAcceptsHostileKeysAndTypes: keys and types are data, not
// headers: spaces, CR, LF, TAB, escapes and non-ASCII are theirs to hold
// (each broker carries them byte for byte; the publisher suite checks).
func TestEnqueueAcceptsHostileKeysAndTypes(t *testing.T) {
	d := &captureDriver{}
	ob := outbox.New(d, nil)
	for _, s := range hostile.Strings {
		m := outbox.Message{Topic: "t", Key: s, Type: s,
			Headers: map[string]string{"inner": "a\tb c", "X-Request-Id": "r-1", "unicode": "☃"}}
		if err := ob.Enqueue(context.Background(), struct{}{}, m); err != nil {
			t.Errorf("Enqueue with key and type %q: %v", s, err)
		}
	}
	if len(d.got) != len(hostile.Strings) {
		t.Fatalf("the driver got %d messages, want %d", len(d.got), len(hostile.Strings))
	}
}

func TestEnqueueFillsIDAndKeepsCallerSlice(t *testing.T) {
	d := &captureDriver{}
	ob := outbox.New(d, nil)
	given := outbox.NewID()
	msgs := []outbox.Message{{Topic: "a"}, {Topic: "b", ID: given}}
	if err := ob.Enqueue(context.Background(), struct{}{}, msgs...); err != nil {
		t.Fatal(err)
	}
	if msgs[0].ID != [16]byte{} || !msgs[0].CreatedAt.IsZero() {
		t.Fatalf("Enqueue modified the caller's slice: %+v", msgs[0])
	}
	if d.got[0].ID.Version() != 7 || d.got[1].ID != given || d.got[0].CreatedAt.IsZero() {
		t.Fatalf("driver got %+v", d.got)
	}
}

// The Logger hears, at Debug, of the IDs each Enqueue wrote.
func TestEnqueueLogsIDs(t *testing.T) {
	var buf logtest.Buffer
	d := &captureDriver{}
	ob := outbox.New[struct{}](d, &outbox.Config{Logger: buf.Logger()})
	id := outbox.NewID()
	if err := ob.Enqueue(context.Background(), struct{}{}, outbox.Message{ID: id, Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	if got := buf.Lines("outbox: enqueued"); len(got) != 1 || !strings.Contains(got[0], id.String()) {
		t.Fatalf("log lines %q, want one naming %s", got, id)
	}
}
