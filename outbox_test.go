package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/outboxgo/outbox"
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
