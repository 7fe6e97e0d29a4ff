package consumer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/consumer"
	"github.com/outboxgo/outbox/subscribers"
)

// memDriver is an inbox driver in memory; down makes every call fail.
type memDriver struct {
	mu   sync.Mutex
	ids  map[uuid.UUID]bool
	down error
}

type tx struct{ ids []uuid.UUID }

func (d *memDriver) RunTx(_ context.Context, fn func(*tx) error) error {
	if d.down != nil {
		return d.down
	}
	t := &tx{}
	if err := fn(t); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range t.ids {
		d.ids[id] = true
	}
	return nil
}

func (d *memDriver) RecordTx(_ context.Context, t *tx, r inbox.Record) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids[r.ID] {
		return false, nil
	}
	t.ids = append(t.ids, r.ID)
	return true, nil
}

func (d *memDriver) Purge(context.Context, time.Time, int) (int64, error) { return 0, nil }

var errExhausted = errors.New("exhausted")

func TestHandle(t *testing.T) {
	failing := errors.New("provider unavailable")
	done := uuid.New()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name      string
		ctx       context.Context
		id        uuid.UUID
		decodeErr error
		delivery  int
		handler   error
		down      bool
		want      subscribers.Action
		outcome   inbox.Outcome
		wantErr   error
		ran       bool
	}{
		{name: "handled", delivery: 1, want: subscribers.ActionAck, outcome: inbox.Handled, ran: true},
		{name: "duplicate", id: done, delivery: 1, want: subscribers.ActionAck, outcome: inbox.Duplicate},
		{name: "undecodable", decodeErr: inbox.ErrInvalidMessage, delivery: 1, want: subscribers.ActionDeadLetter, wantErr: inbox.ErrInvalidMessage},
		{name: "failed", delivery: 2, handler: failing, want: subscribers.ActionRetry, wantErr: failing, ran: true},
		{name: "failed the last time", delivery: 3, handler: failing, want: subscribers.ActionDeadLetter, wantErr: failing, ran: true},
		{name: "permanent", delivery: 1, handler: inbox.Permanent(failing), want: subscribers.ActionDeadLetter, wantErr: failing, ran: true},
		{name: "hard stop", ctx: cancelled, delivery: 3, handler: context.Canceled, want: subscribers.ActionRelease, wantErr: context.Canceled, ran: true},
		{name: "exhausted", delivery: 4, want: subscribers.ActionDeadLetter, wantErr: errExhausted},
		{name: "exhausted, handled before", id: done, delivery: 4, want: subscribers.ActionAck, outcome: inbox.Duplicate},
		{name: "exhausted, inbox down", delivery: 4, down: true, want: subscribers.ActionRetry, wantErr: failing},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &memDriver{ids: map[uuid.UUID]bool{done: true}}
			if c.down {
				d.down = failing
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			id := c.id
			if id == uuid.Nil {
				id = uuid.New()
			}
			ran := false
			h := func(context.Context, *tx, inbox.Message) error { ran = true; return c.handler }
			in, err := inbox.New[*tx](d, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := consumer.Handle(ctx, in, h, inbox.Message{ID: id}, c.decodeErr, c.delivery, 3, errExhausted)
			if r.Action != c.want || r.Outcome != c.outcome || !errors.Is(r.Err, c.wantErr) || (c.wantErr == nil) != (r.Err == nil) || ran != c.ran {
				t.Fatalf("Handle = %+v (handler ran: %v), want verdict %d, outcome %v, error %v (handler runs: %v)",
					r, ran, c.want, c.outcome, c.wantErr, c.ran)
			}
		})
	}
}

func TestSafe(t *testing.T) {
	h := consumer.Safe(func(context.Context, *tx, inbox.Message) error { panic("boom") })
	if err := h(context.Background(), nil, inbox.Message{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Safe turned a panic into %v", err)
	}
}

func TestLifecycle(t *testing.T) {
	l := consumer.NewLifecycle("test subscriber")
	if err := l.Stop(context.Background(), func() { t.Error("halt before Start") }); err != nil {
		t.Fatalf("Stop before Start: %v", err)
	}
	if err := l.Start(func() error { return errors.New("no broker") }); err == nil {
		t.Fatal("Start hid start's error")
	}
	release := make(chan struct{})
	if err := l.Start(func() error {
		go func() {
			<-l.Context().Done() // a handler only a hard Stop ends
			<-release
			l.Done()
		}()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := l.Start(func() error { return nil }); err == nil || !strings.Contains(err.Error(), "test subscriber: already started") {
		t.Fatalf("second Start = %v", err)
	}
	halts := 0
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	close(release)
	if err := l.Stop(ctx, func() { halts++ }); !errors.Is(err, context.Canceled) {
		t.Fatalf("hard Stop = %v", err)
	}
	if err := l.Stop(context.Background(), func() { halts++ }); err != nil || halts != 1 || !l.Stopped() || l.Wait(time.Hour) {
		t.Fatalf("second Stop = %v after %d halts; stopped %v", err, halts, l.Stopped())
	}
}
