package inboxtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
)

// The same message delivered three times has one effect, and one record
// that holds its topic and the clock's time (to the microsecond, in UTC).
func testDuplicateHasOneEffect[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	m := msg()
	var outcomes []inbox.Outcome
	for range 3 {
		outcomes = append(outcomes, handle(t, f.in, m, f.apply))
	}
	if fmt.Sprint(outcomes) != "[handled duplicate duplicate]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if n := f.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	rs := f.Records(t)
	want := inbox.Record{ID: m.ID, Topic: m.Topic, ReceivedAt: t0.Truncate(time.Microsecond)}
	if len(rs) != 1 || rs[0].ID != want.ID || rs[0].Topic != want.Topic || !rs[0].ReceivedAt.Equal(want.ReceivedAt) {
		t.Fatalf("records %+v, want [%+v]", rs, want)
	}
}

// RecordTx in the caller's own transaction: a duplicate is reported as
// such and the transaction goes on, to record another message and apply
// its effect. A nil transaction is an error, not a panic.
func testRecordTxLeavesTxUsable[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	ctx := ctxT(t)
	m, other := msg(), msg()
	handle(t, f.in, m, nop[TTx])
	err := f.Driver.RunTx(ctx, func(tx TTx) error {
		if inserted, err := f.in.RecordTx(ctx, tx, m); err != nil || inserted {
			return fmt.Errorf("RecordTx of a recorded message = %v, %v; want false, nil", inserted, err)
		}
		if inserted, err := f.in.RecordTx(ctx, tx, other); err != nil || !inserted {
			return fmt.Errorf("RecordTx of a new message after a duplicate = %v, %v; want true, nil", inserted, err)
		}
		return f.Apply(ctx, tx, other)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, r := f.effects(t, other.ID), len(f.Records(t)); n != 1 || r != 2 {
		t.Fatalf("%d effects, %d records; want 1 and 2", n, r)
	}
	var zero TTx
	if _, err := f.Driver.RecordTx(ctx, zero, inbox.Record{ID: outbox.NewID(), Topic: "x", ReceivedAt: t0}); err == nil {
		t.Fatal("RecordTx with a nil transaction succeeded")
	}
}

// A failing handler rolls back its effect and the record, so the next
// delivery runs it again; a panicking one too, and the panic goes on up.
func testFailureRecordsNothing[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	m := msg()
	deliver := func(fail error, panics bool) (inbox.Outcome, error) {
		return f.in.Handle(ctxT(t), m, func(ctx context.Context, tx TTx, m inbox.Message) error {
			if err := f.Apply(ctx, tx, m); err != nil {
				return err
			}
			if panics {
				panic("handler panics")
			}
			return fail
		})
	}
	boom := errors.New("boom")
	if _, err := deliver(boom, false); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the handler's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler's panic did not propagate")
			}
		}()
		_, _ = deliver(nil, true)
	}()
	if n, r := f.effects(t, m.ID), len(f.Records(t)); n != 0 || r != 0 {
		t.Fatalf("%d effects, %d records after failures; want none", n, r)
	}
	if o, err := deliver(nil, false); err != nil || o != inbox.Handled {
		t.Fatalf("Handle after failures = %v, %v; want handled", o, err)
	}
	if n := f.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// A delivery whose context ends after its handler succeeded and before the
// commit commits nothing, and says why: its error is the context's (a
// consumer being stopped, not a database failure). On a database/sql
// transaction the handler waits until database/sql has rolled it back on
// the cancel, when its Commit can only say sql.ErrTxDone.
func testCanceledBeforeCommit[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	m := msg()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	_, err := f.in.Handle(ctx, m, func(ctx context.Context, tx TTx, m inbox.Message) error {
		if err := f.Apply(ctx, tx, m); err != nil {
			return err
		}
		cancel()
		if stx, ok := any(tx).(*sql.Tx); ok {
			waitFor(t, "database/sql to roll the transaction back on the cancel", 30*time.Second, func() bool {
				_, err := stx.ExecContext(context.Background(), "SELECT 1")
				return errors.Is(err, sql.ErrTxDone)
			})
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Handle canceled before its commit = %v; want an error that is context.Canceled", err)
	}
	if n, r := f.effects(t, m.ID), len(f.Records(t)); n != 0 || r != 0 {
		t.Fatalf("%d effects, %d records after a delivery canceled before its commit; want none", n, r)
	}
}

// A message without an ID cannot be deduplicated: a permanent error, and
// the handler does not run.
func testInvalidMessage[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	ctx := ctxT(t)
	m := msg()
	m.ID = uuid.Nil
	_, err := f.in.Handle(ctx, m, func(context.Context, TTx, inbox.Message) error {
		t.Error("the handler ran for a message without an ID")
		return nil
	})
	if !errors.Is(err, inbox.ErrInvalidMessage) || !inbox.IsPermanent(err) {
		t.Fatalf("Handle without an ID = %v, want a permanent ErrInvalidMessage", err)
	}
	err = f.Driver.RunTx(ctx, func(tx TTx) error {
		_, err := f.in.RecordTx(ctx, tx, m)
		return err
	})
	if !errors.Is(err, inbox.ErrInvalidMessage) {
		t.Fatalf("RecordTx without an ID = %v, want ErrInvalidMessage", err)
	}
	if r := len(f.Records(t)); r != 0 {
		t.Fatalf("%d records, want none", r)
	}
}

// The topic is for people reading the table: an empty one, one that is not
// UTF-8 or holds a NUL, or a very long one does not fail the message, and
// its redelivery is still a duplicate.
func testOddTopics[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	for _, topic := range []string{"", "a\xffb", "a\x00b", strings.Repeat("é", 40000)} {
		m := msg()
		m.Topic = topic
		for _, want := range []inbox.Outcome{inbox.Handled, inbox.Duplicate} {
			if o, err := f.in.Handle(ctxT(t), m, f.apply); err != nil || o != want {
				t.Fatalf("Handle with topic %.20q (%d bytes) = %v, %v; want %v", topic, len(topic), o, err, want)
			}
		}
		if n := f.effects(t, m.ID); n != 1 {
			t.Fatalf("topic %.20q: %d effects, want 1", topic, n)
		}
	}
	if r := len(f.Records(t)); r != 4 {
		t.Fatalf("%d records, want 4", r)
	}
}

// A zombie relay (stalled past its claim, then awake) can publish an old
// event again after newer events of its key. Through the inbox the
// consumer's effects stay in per-key order: the late copy is a duplicate.
func testLateDuplicateKeepsOrder[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	e := make([]inbox.Message, 3)
	for i := range e {
		e[i] = inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-1", Payload: []byte(fmt.Sprint(i + 1))}
	}
	// What the broker delivered: 1, 2, then the zombie's late copy of 1, then 3.
	var outcomes []inbox.Outcome
	for _, m := range []inbox.Message{e[0], e[1], e[0], e[2]} {
		outcomes = append(outcomes, handle(t, f.in, m, f.apply))
	}
	if fmt.Sprint(outcomes) != "[handled handled duplicate handled]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	var notes []string
	for _, e := range f.Effects(t) {
		notes = append(notes, e.Note)
	}
	if fmt.Sprint(notes) != "[1 2 3]" {
		t.Fatalf("effects in order %v, want [1 2 3]", notes)
	}
}

// A handler's chained events commit with its effect and its record, and
// not at all when it fails; a duplicate does not enqueue them again.
func testChainedEvents[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	if f.Chain == nil {
		t.Skip("Env.Chain is nil")
	}
	c := f.Chain(t)
	deliver := func(m inbox.Message, fail bool) (inbox.Outcome, error) {
		return f.in.Handle(ctxT(t), m, func(ctx context.Context, tx TTx, m inbox.Message) error {
			if err := c.Outbox.Enqueue(ctx, tx, outbox.Message{Topic: "next", Key: m.Key, Payload: []byte(m.ID.String())}); err != nil {
				return err
			}
			if fail {
				return errors.New("provider failed")
			}
			return nil
		})
	}
	ok, bad := msg(), msg()
	if _, err := deliver(bad, true); err == nil {
		t.Fatal("the failing handler succeeded")
	}
	for _, want := range []inbox.Outcome{inbox.Handled, inbox.Duplicate} {
		if o, err := deliver(ok, false); err != nil || o != want {
			t.Fatalf("Handle = %v, %v; want %v", o, err, want)
		}
	}
	if p := c.Payloads(t); len(p) != 1 || p[0] != ok.ID.String() {
		t.Fatalf("outbox holds %v, want one event chained from %s", p, ok.ID)
	}
}

// Two consumers' tables in one database: each handles the same message
// once.
func testOtherTable[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	if f.OtherTable == nil {
		t.Skip("Env.OtherTable is nil")
	}
	other, err := inbox.New(f.OtherTable(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := msg()
	outcomes := []inbox.Outcome{handle(t, f.in, m, f.apply)}
	for range 2 {
		outcomes = append(outcomes, handle(t, other, m, f.apply))
	}
	if fmt.Sprint(outcomes) != "[handled handled duplicate]" {
		t.Fatalf("outcomes %v, want [handled handled duplicate]", outcomes)
	}
	if n := f.effects(t, m.ID); n != 2 {
		t.Fatalf("%d effects, want 2 (one per consumer)", n)
	}
	if r := len(f.Records(t)); r != 1 {
		t.Fatalf("%d records in the first table, want 1", r)
	}
}
