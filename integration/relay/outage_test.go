package relay_test

import (
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// A broker outage: events accumulate, nobody is charged an attempt, and all
// drain when the broker returns, through the same relay and publisher.
func TestBrokerOutage(t *testing.T) {
	b := setup(t)
	srv := natstest.StartServer(t, "") // private: the shared NATS stays up
	nc := srv.Connect(t)
	b.prefix, b.stream = natstest.NewStream(t, nc)
	b.js = natstest.JetStream(t, nc)
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: srv.URL(), SubjectPrefix: b.prefix, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	r := start(t, b.store, pub, &relay.Config{
		PublishTimeout: 2 * time.Second,
		OutageBackoff:  outbox.Backoff{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		MaxAttempts:    2, // an outage charged to the events would kill them fast
	})

	b.enqueue(t, true, events("orders", 10)...)
	b.arrivedIDs(t, 10)
	// Their rows gone, the relay has all their acknowledgements: a
	// shutdown now cannot fail the last of them and leave them pending.
	waitFor(t, "the first events to be deleted", 30*time.Second, func() bool { return len(b.rows(t)) == 0 })

	srv.Shutdown()
	b.enqueue(t, true, events("orders", 100)...)
	waitFor(t, "the relay to meet the outage three times", 30*time.Second, func() bool { return r.Stats().Outages >= 3 })
	rows := b.rows(t)
	if len(rows) != 100 {
		t.Fatalf("%d rows during the outage, want the 100 enqueued", len(rows))
	}
	for id, row := range rows {
		if row.status != 0 || row.attempts != 0 {
			t.Fatalf("event %s was charged for the outage: %+v", id, row)
		}
	}

	srv.Start()
	ids := b.arrivedIDs(t, 110)
	if len(ids) != 110 {
		t.Fatalf("after the outage %d events arrived, want 110", len(ids))
	}
	waitFor(t, "the table to empty", 10*time.Second, func() bool { return len(b.rows(t)) == 0 })
	if st := r.Stats(); st.Retried != 0 || st.Dead != 0 {
		t.Fatalf("outage charged to events: %+v", st)
	}
}
