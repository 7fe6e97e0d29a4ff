package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	dto "github.com/prometheus/client_model/go"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/metrics"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// A relay drains two topics to JetStream: the published totals match what
// arrived, and the backlog gauges and the lag match the table before and
// after.
func TestPublishedBacklogAndLag(t *testing.T) {
	b := setup(t, nil, nil)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)

	b.enqueue(t, events("orders", 30)...)
	b.enqueue(t, events("users", 20)...)
	b.enqueue(t, outbox.Message{Topic: "orders", Payload: []byte(`{}`), NotBefore: time.Now().Add(time.Hour)})

	// Before any relay: the gauges are the table's.
	for _, topic := range []string{"orders", "users"} {
		pending := b.count(t, fmt.Sprintf("status = 0 AND topic = '%s'", topic))
		due := b.count(t, fmt.Sprintf("status = 0 AND topic = '%s' AND available_at <= now()", topic))
		if v, _ := value(t, b.reg, "outbox_pending_events", "topic", topic); v != pending {
			t.Errorf("outbox_pending_events{topic=%q} = %v, the table has %v", topic, v, pending)
		}
		if v, _ := value(t, b.reg, "outbox_due_events", "topic", topic); v != due {
			t.Errorf("outbox_due_events{topic=%q} = %v, the table has %v", topic, v, due)
		}
	}
	if v, _ := value(t, b.reg, "outbox_scheduled_events", "topic", "orders"); v != 1 {
		t.Errorf("outbox_scheduled_events{topic=orders} = %v, want 1", v)
	}
	ageSQL := fmt.Sprintf(`SELECT extract(epoch FROM now() - min(created_at))::float8 FROM %q.messages WHERE status = 0 AND topic = 'users'`, b.schema)
	var before, after float64
	if err := b.pool.QueryRow(context.Background(), ageSQL).Scan(&before); err != nil {
		t.Fatal(err)
	}
	lag, _ := value(t, b.reg, "outbox_oldest_due_event_age_seconds", "topic", "users")
	if err := b.pool.QueryRow(context.Background(), ageSQL).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if lag < before-0.5 || lag > after+0.5 {
		t.Errorf("lag{users} = %vs, the table's oldest due event is %v–%vs old", lag, before, after)
	}
	// A real scrape says the same.
	code, body := b.get(t, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `outbox_pending_events{topic="orders"} 31`) {
		t.Errorf("GET /metrics: %d, want outbox_pending_events{topic=\"orders\"} 31 in:\n%s", code, body)
	}
	if code, body := b.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz before the relay: %d %q, want 200 (nothing is 5m old)", code, body)
	}

	b.startRelay(t, natsPublisher(t, natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix}), &relay.Config{BatchSize: 16})
	natstest.WaitForCount(t, js, stream, 50, waitFor)
	waitValue(t, b.reg, 30, "outbox_published_events_total", "topic", "orders")
	waitValue(t, b.reg, 20, "outbox_published_events_total", "topic", "users")
	if got, want := streamCount(t, js, stream), 50.0; got != want {
		t.Errorf("the stream holds %v messages, want %v", got, want)
	}
	waitValue(t, b.reg, 0, "outbox_due_events")
	waitValue(t, b.reg, 1, "outbox_pending_events") // the scheduled one
	if v, _ := value(t, b.reg, "outbox_oldest_due_event_age_seconds"); v != 0 {
		t.Errorf("lag after the drain = %v, want 0", v)
	}
	if v, _ := value(t, b.reg, "outbox_publish_latency_seconds"); v != 50 {
		t.Errorf("outbox_publish_latency_seconds has %v samples, want 50", v)
	}
	// Every batch is counted: the sizes add up to the events claimed.
	sizes := histogram(t, b, "outbox_batch_size")
	if sizes.GetSampleSum() != 50 || sizes.GetSampleCount() < 4 {
		t.Errorf("outbox_batch_size: %d batches of %v events, want ≥ 4 batches (16 a batch) of 50", sizes.GetSampleCount(), sizes.GetSampleSum())
	}
	if d := histogram(t, b, "outbox_batch_duration_seconds"); d.GetSampleCount() != sizes.GetSampleCount() || d.GetSampleSum() <= 0 {
		t.Errorf("outbox_batch_duration_seconds: %d samples summing %v, want %d, above 0", d.GetSampleCount(), d.GetSampleSum(), sizes.GetSampleCount())
	}
	if v, _ := value(t, b.reg, "outbox_relay_batches_total"); v != float64(sizes.GetSampleCount()) {
		t.Errorf("outbox_relay_batches_total = %v, want %d", v, sizes.GetSampleCount())
	}
	if v, _ := value(t, b.reg, "outbox_relay_claims_total"); v < float64(sizes.GetSampleCount()) {
		t.Errorf("outbox_relay_claims_total = %v, want ≥ %d", v, sizes.GetSampleCount())
	}
	if v, ok := value(t, b.reg, "outbox_publish_failures_total"); ok && v != 0 {
		t.Errorf("outbox_publish_failures_total = %v, want none", v)
	}
	if v, _ := value(t, b.reg, "outbox_relay_paused"); v != 0 {
		t.Errorf("outbox_relay_paused = %v, want 0", v)
	}
}

// histogram returns the one series of a histogram.
func histogram(t *testing.T, b *bundle, name string) *dto.Histogram {
	t.Helper()
	mfs, err := b.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no histogram %s", name)
	return nil
}

// A broker outage shows in the failure counters, pauses the relay and
// fails /readyz; the broker's return undoes both.
func TestOutage(t *testing.T) {
	b := setup(t, nil, nil)
	srv := natstest.StartServer(t, "")
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	b.startRelay(t, natsPublisher(t, natspub.PublisherConfig{URL: srv.URL(), SubjectPrefix: prefix}), nil)

	b.enqueue(t, events("orders", 5)...)
	waitValue(t, b.reg, 5, "outbox_published_events_total", "topic", "orders")
	b.waitReady(t, http.StatusOK, "ok")

	srv.Shutdown()
	b.enqueue(t, events("orders", 5)...)
	eventually(t, "unavailable failures counted", func() (bool, string) {
		v, _ := value(t, b.reg, "outbox_publish_failures_total", "topic", "orders", "reason", metrics.ReasonUnavailable)
		return v > 0, fmt.Sprint(v)
	})
	waitValue(t, b.reg, 1, "outbox_relay_paused", "reason", metrics.ReasonUnavailable)
	body := b.waitReady(t, http.StatusServiceUnavailable, "the broker is unavailable")
	if strings.Count(body, "\n") != 1 {
		t.Errorf("/readyz reason is not one line: %q", body)
	}
	if v, _ := value(t, b.reg, "outbox_relay_outages_total"); v < 1 {
		t.Errorf("outbox_relay_outages_total = %v, want ≥ 1", v)
	}
	if v, _ := value(t, b.reg, "outbox_pending_events", "topic", "orders"); v != b.count(t, "status = 0") || v != 5 {
		t.Errorf("outbox_pending_events during the outage = %v, want 5 as in the table", v)
	}
	if v, _ := value(t, b.reg, "outbox_retried_events_total"); v != 0 {
		t.Errorf("outbox_retried_events_total = %v: an outage charges no event", v)
	}

	srv.Start()
	natstest.WaitForCount(t, js, stream, 10, waitFor)
	waitValue(t, b.reg, 10, "outbox_published_events_total", "topic", "orders")
	waitValue(t, b.reg, 0, "outbox_relay_paused")
	b.waitReady(t, http.StatusOK, "ok")
}

// A broker that refuses the relay's configuration (an account without
// JetStream) is counted as refused, pauses the relay and fails /readyz.
func TestRefused(t *testing.T) {
	b := setup(t, nil, nil)
	srv := natstest.StartUsersServer(t)
	b.startRelay(t, natsPublisher(t, natspub.PublisherConfig{
		URL: srv.URLWith(url.UserPassword(natstest.NoJetStreamUser, natstest.Password)), SubjectPrefix: "refused"}), nil)

	b.enqueue(t, events("orders", 3)...)
	eventually(t, "refused failures counted", func() (bool, string) {
		v, _ := value(t, b.reg, "outbox_publish_failures_total", "topic", "orders", "reason", metrics.ReasonRefused)
		return v >= 3, fmt.Sprint(v)
	})
	waitValue(t, b.reg, 1, "outbox_relay_paused", "reason", metrics.ReasonRefused)
	b.waitReady(t, http.StatusServiceUnavailable, "refused the relay's configuration")
	if v, _ := value(t, b.reg, "outbox_relay_refusals_total"); v < 1 {
		t.Errorf("outbox_relay_refusals_total = %v, want ≥ 1", v)
	}
	if v, ok := value(t, b.reg, "outbox_published_events_total"); ok && v != 0 {
		t.Errorf("outbox_published_events_total = %v, want 0", v)
	}
	if v, _ := value(t, b.reg, "outbox_pending_events", "topic", "orders"); v != 3 || b.count(t, "status = 0 AND attempts = 0") != 3 {
		t.Errorf("outbox_pending_events = %v, want the 3 events pending and uncharged", v)
	}
}

// A message the broker can never take is counted permanent and dead; one
// no stream captures is counted other, retried, then dead; the dead
// gauges match the table.
func TestPermanentAndOther(t *testing.T) {
	b := setup(t, nil, nil)
	srv := natstest.StartServer(t, "", func(o *server.Options) { o.MaxPayload = 4096 })
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	lost := natstest.Name(t) // a subject no stream captures
	pub := natsPublisher(t, natspub.PublisherConfig{URL: srv.URL(), Subject: func(topic string) string {
		if topic == "nostream" {
			return lost + ".x"
		}
		return prefix + "." + topic
	}})
	b.startRelay(t, pub, &relay.Config{MaxAttempts: 2, RetryBackoff: outbox.Backoff{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond}})

	b.enqueue(t,
		outbox.Message{Topic: "big", Payload: bytes.Repeat([]byte("x"), 8<<10)}, // above the server's max_payload
		outbox.Message{Topic: "nostream", Payload: []byte(`{}`)},
		outbox.Message{Topic: "fine", Payload: []byte(`{}`)})
	natstest.WaitForCount(t, js, stream, 1, waitFor)
	waitValue(t, b.reg, 1, "outbox_published_events_total", "topic", "fine")
	waitValue(t, b.reg, 2, "outbox_dead_lettered_events_total")
	if v, _ := value(t, b.reg, "outbox_publish_failures_total", "topic", "big", "reason", metrics.ReasonPermanent); v != 1 {
		t.Errorf("failures{big,permanent} = %v, want 1", v)
	}
	if v, _ := value(t, b.reg, "outbox_publish_failures_total", "topic", "nostream", "reason", metrics.ReasonOther); v != 2 {
		t.Errorf("failures{nostream,other} = %v, want 2 (MaxAttempts)", v)
	}
	if v, _ := value(t, b.reg, "outbox_retried_events_total"); v != 1 {
		t.Errorf("outbox_retried_events_total = %v, want 1", v)
	}
	for _, topic := range []string{"big", "nostream"} {
		want := b.count(t, fmt.Sprintf("status = 2 AND topic = '%s'", topic))
		if v, _ := value(t, b.reg, "outbox_dead_events", "topic", topic); v != want || want != 1 {
			t.Errorf("outbox_dead_events{%s} = %v, the table has %v dead", topic, v, want)
		}
	}
	if v, _ := value(t, b.reg, "outbox_relay_paused"); v != 0 {
		t.Errorf("outbox_relay_paused = %v: failures of events do not pause the relay", v)
	}
}
