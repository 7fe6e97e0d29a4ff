package inboxtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/clocktest"
)

// Run runs every case against h, each in parallel on an Env of its own.
func Run[TTx any](t *testing.T, h Harness[TTx]) {
	if h.Setup == nil {
		t.Fatal("inboxtest: Harness.Setup is nil")
	}
	for _, c := range []struct {
		name string
		f    func(*testing.T, Harness[TTx])
	}{
		{"DuplicateHasOneEffect", testDuplicateHasOneEffect[TTx]},
		{"RecordTxLeavesTxUsable", testRecordTxLeavesTxUsable[TTx]},
		{"FailureRecordsNothing", testFailureRecordsNothing[TTx]},
		{"CanceledBeforeCommit", testCanceledBeforeCommit[TTx]},
		{"InvalidMessage", testInvalidMessage[TTx]},
		{"OddTopics", testOddTopics[TTx]},
		{"LateDuplicateKeepsOrder", testLateDuplicateKeepsOrder[TTx]},
		{"ChainedEvents", testChainedEvents[TTx]},
		{"OtherTable", testOtherTable[TTx]},
		{"ConcurrentDuplicate", testConcurrentDuplicate[TTx]},
		{"WaitersOnRolledBackFirst", testWaitersOnRolledBackFirst[TTx]},
		{"ConcurrentDeliveries", testConcurrentDeliveries[TTx]},
		{"Purge", testPurge[TTx]},
		{"PurgeSkipsLocked", testPurgeSkipsLocked[TTx]},
		{"ConcurrentPurges", testConcurrentPurges[TTx]},
		{"MigrateIsIdempotent", testMigrateIsIdempotent[TTx]},
		{"MigrationFile", testMigrationFile[TTx]},
		{"BadNames", testBadNames[TTx]},
		{"SchemaMissing", testSchemaMissing[TTx]},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.f(t, h)
		})
	}
}

// t0 is the suite's clock at the start of a case: with nanoseconds, which
// every driver truncates to the microsecond.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// fixture is a case's Env with an inbox over its driver on a test clock.
type fixture[TTx any] struct {
	Env[TTx]
	clock *clocktest.Clock
	in    *inbox.Inbox[TTx]
}

func setup[TTx any](t *testing.T, h Harness[TTx], cfg inbox.Config) fixture[TTx] {
	t.Helper()
	env := h.Setup(t)
	clock := clocktest.New(t0)
	cfg.Clock = clock
	in, err := inbox.New(env.Driver, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fixture[TTx]{Env: env, clock: clock, in: in}
}

// apply is a handler that applies the message's effect.
func (f fixture[TTx]) apply(ctx context.Context, tx TTx, m inbox.Message) error {
	return f.Apply(ctx, tx, m)
}

// effects counts the committed effects of id.
func (f fixture[TTx]) effects(t *testing.T, id uuid.UUID) int {
	t.Helper()
	n := 0
	for _, e := range f.Effects(t) {
		if e.ID == id {
			n++
		}
	}
	return n
}

// handle delivers m through in with handler h, failing the test on error.
func handle[TTx any](t *testing.T, in *inbox.Inbox[TTx], m inbox.Message, h inbox.Handler[TTx]) inbox.Outcome {
	t.Helper()
	o, err := in.Handle(ctxT(t), m, h)
	if err != nil {
		t.Fatalf("Handle(%s) = %v", m.ID, err)
	}
	return o
}

func msg() inbox.Message {
	return inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", Type: "OrderConfirmed", Payload: []byte(`{}`)}
}

func nop[TTx any](context.Context, TTx, inbox.Message) error { return nil }

// ctxT is a case's context: canceled at cleanup, and after a minute, so
// that a delivery stuck on a lock fails the case instead of hanging it.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFor checks cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}
