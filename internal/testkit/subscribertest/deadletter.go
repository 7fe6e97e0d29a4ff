package subscribertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxgo/outbox/subscribers"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox/inbox"
)

// testDeadLetters: a message that keeps failing goes to the dead-letter
// destination after MaxDeliveries deliveries, with its last error; one
// failing permanently and one without an event ID go there at once. Each
// keeps its payload and headers and names its source and consumer; none
// leaves an effect or stays at the broker.
func testDeadLetters(t *testing.T, h Harness) {
	f := setup(t, h)
	evs := events(2)
	failing, permanent := evs[0], evs[1]
	var rec recorder
	c := rec.hook(f.config("dlq"))
	c.Options.MaxDeliveries = 3
	c.Handler = func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if err := f.effect(ctx, tx, m); err != nil {
			return err
		}
		if m.ID == permanent.ID {
			return inbox.Permanent(errors.New("payload does not parse"))
		}
		return fmt.Errorf("provider exploded on delivery %d", m.Delivery)
	}
	s := f.start(c)
	f.Publish(t, failing, permanent)
	f.PublishNoID(t, "no id")
	dead := f.DeadLetters(t, 3, timeout)
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3: %+v", len(dead), dead)
	}
	byID := map[string]DeadLetter{}
	for _, d := range dead {
		byID[d.ID] = d
	}
	check := func(id, wantErr string, wantDeliveries int, wantPayload string) {
		t.Helper()
		d, ok := byID[id]
		if !ok {
			t.Fatalf("no dead letter for %q among %+v", id, dead)
		}
		if !strings.Contains(d.Error, wantErr) || d.Deliveries != wantDeliveries || d.Payload != wantPayload ||
			d.Source != f.Source || d.Consumer != f.consumer("dlq") {
			t.Fatalf("dead letter for %q: %+v; want error %q after %d deliveries, payload %q, from %s by %s",
				id, d, wantErr, wantDeliveries, wantPayload, f.Source, f.consumer("dlq"))
		}
	}
	check(failing.ID.String(), "provider exploded on delivery 3", 3, string(failing.Payload))
	check(permanent.ID.String(), "payload does not parse", 1, string(permanent.Payload))
	check("", inbox.ErrInvalidMessage.Error(), 1, "no id")
	if byID[failing.ID.String()].Headers["correlation-id"] != "c1" {
		t.Fatalf("the dead letter lost the event's headers: %v", byID[failing.ID.String()].Headers)
	}
	waitFor(t, "three dead-letter settlements", func() bool { return rec.count(subscribers.ActionDeadLetter) == 3 })
	f.stop(s)
	for _, st := range rec.list() {
		if st.Action == subscribers.ActionDeadLetter && st.Err == nil {
			t.Fatalf("dead-letter settlement without its error: %+v", st)
		}
		if st.Action == subscribers.ActionAck {
			t.Fatalf("a failing message was acknowledged: %+v", st)
		}
	}
	if ids, _ := f.effectOrder(); len(ids) != 0 {
		t.Fatalf("%d effects, want none", len(ids))
	}
	if n := f.held("dlq"); n != 0 {
		t.Fatalf("the broker holds %d messages", n)
	}
}
