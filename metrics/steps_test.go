package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// Each batch's claim, publish and completion are timed: after a drain
// the publish and complete histograms have one sample per batch, the
// claim histogram one per claim (empty ones too), and /metrics shows them.
func TestStepDurations(t *testing.T) {
	b := setup(t, nil, nil)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	b.enqueue(t, events("orders", 40)...)
	r := b.startRelay(t, natsPublisher(t, natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix}), &relay.Config{BatchSize: 10})
	natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 40, waitFor)
	// Every batch completed and observed: its size and its steps.
	var batches float64
	eventually(t, "the 40 events' batches observed", func() (bool, string) {
		sizes := histogram(t, b, "outbox_batch_size")
		batches = float64(r.Stats().Batches)
		done := histogram(t, b, "outbox_complete_duration_seconds").GetSampleCount()
		return sizes.GetSampleSum() == 40 && float64(sizes.GetSampleCount()) == batches && float64(done) == batches,
			fmt.Sprintf("%v events in %d batches, %d completions timed, %v batches counted", sizes.GetSampleSum(), sizes.GetSampleCount(), done, batches)
	})
	if batches < 4 {
		t.Fatalf("%v batches of at most 10 for 40 events", batches)
	}
	for _, name := range []string{"outbox_publish_duration_seconds", "outbox_complete_duration_seconds"} {
		h := histogram(t, b, name)
		if float64(h.GetSampleCount()) != batches || h.GetSampleSum() <= 0 {
			t.Errorf("%s: %d samples summing %vs, want one per batch (%v), above 0", name, h.GetSampleCount(), h.GetSampleSum(), batches)
		}
	}
	claims := histogram(t, b, "outbox_claim_duration_seconds")
	if float64(claims.GetSampleCount()) < batches || claims.GetSampleSum() <= 0 {
		t.Errorf("outbox_claim_duration_seconds: %d samples summing %vs, want at least one per batch (%v)", claims.GetSampleCount(), claims.GetSampleSum(), batches)
	}
	// The parts fit in the whole: a batch's publish and completion took
	// no longer than the batch.
	whole := histogram(t, b, "outbox_batch_duration_seconds").GetSampleSum()
	parts := histogram(t, b, "outbox_publish_duration_seconds").GetSampleSum() + histogram(t, b, "outbox_complete_duration_seconds").GetSampleSum()
	if parts > whole {
		t.Errorf("publish + complete took %vs, more than the batches' %vs", parts, whole)
	}
	_, body := b.get(t, "/metrics")
	for _, want := range []string{"outbox_claim_duration_seconds_count ", "outbox_publish_duration_seconds_bucket{le=", "outbox_complete_duration_seconds_sum "} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
}

// failingTopic fails every message of one topic while fail is set, and
// publishes the rest through pub.
type failingTopic struct {
	publishers.Publisher
	topic string
	fail  atomic.Bool
}

func (f *failingTopic) Publish(ctx context.Context, msgs []outbox.Message) []error {
	if !f.fail.Load() {
		return f.Publisher.Publish(ctx, msgs)
	}
	errs := make([]error, len(msgs))
	var pass []outbox.Message
	var at []int
	for i, m := range msgs {
		if m.Topic == f.topic {
			errs[i] = errors.New("the broker rejects this one")
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	for j, err := range f.Publisher.Publish(ctx, pass) {
		errs[at[j]] = err
	}
	return errs
}

// A keyed event that keeps failing blocks its key: outbox_blocked_keys
// counts those keys by topic, as the table says, and falls to 0 once they
// go through.
func TestBlockedKeys(t *testing.T) {
	b := setup(t, nil, nil)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	pub := &failingTopic{Publisher: natsPublisher(t, natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix}), topic: "payments"}
	pub.fail.Store(true)
	var msgs []outbox.Message
	for _, key := range []string{"k1", "k2", "k3"} {
		for i := range 2 {
			msgs = append(msgs, outbox.Message{Topic: "payments", Key: key, Payload: []byte(fmt.Sprint(i))})
		}
	}
	msgs = append(msgs, outbox.Message{Topic: "orders", Key: "k9", Payload: []byte(`{}`)})
	b.enqueue(t, msgs...)
	b.startRelay(t, pub, &relay.Config{RetryBackoff: outbox.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}})

	natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 1, waitFor) // orders goes through
	blockedSQL := "status = 0 AND attempts > 0 AND topic = 'payments'"
	waitValue(t, b.reg, 3, "outbox_blocked_keys", "topic", "payments")
	if n := b.count(t, blockedSQL); n != 3 {
		t.Errorf("the table has %v failed heads, want 3 (one per key)", n)
	}
	if v, _ := value(t, b.reg, "outbox_blocked_keys", "topic", "orders"); v != 0 {
		t.Errorf("outbox_blocked_keys{orders} = %v, want 0", v)
	}
	_, body := b.get(t, "/metrics")
	if !strings.Contains(body, `outbox_blocked_keys{topic="payments"} 3`) {
		t.Errorf("/metrics has no outbox_blocked_keys{topic=\"payments\"} 3")
	}

	pub.fail.Store(false)
	natstest.WaitForCount(t, natstest.JetStream(t, nc), stream, 7, waitFor)
	eventually(t, "no key blocked", func() (bool, string) {
		v, _ := value(t, b.reg, "outbox_blocked_keys")
		return v == 0, fmt.Sprint(v)
	})
}

// When the store fails to mark a batch the broker acknowledged, its
// events are counted in outbox_unmarked_published_events_total and
// published again; the broker's dedup (Nats-Msg-Id) keeps one copy each.
func TestUnmarkedRepublished(t *testing.T) {
	pool := pgtest.Pool(t)
	proxy := tcpproxy.Start(t, "127.0.0.1:5432")
	cfg, err := pgxpool.ParseConfig(strings.Replace(pgtest.URL(), "127.0.0.1:5432", proxy.Addr, 1))
	if err != nil {
		t.Fatal(err)
	}
	via, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(via.Close)
	b := setupOn(t, pool, via, nil, nil)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	b.enqueue(t, events("orders", 5)...)

	// The first batch's connection is cut between the acknowledgement and
	// the mark.
	var cut atomic.Bool
	hooks := relay.Hooks{AfterPublish: func([]outbox.Message, []error) {
		if cut.CompareAndSwap(false, true) {
			proxy.Drop()
		}
	}}
	b.startRelay(t, natsPublisher(t, natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix}), &relay.Config{Hooks: hooks})

	waitValue(t, b.reg, 5, "outbox_unmarked_published_events_total")
	waitValue(t, b.reg, 10, "outbox_published_events_total", "topic", "orders") // each once more
	eventually(t, "the table drained", func() (bool, string) {
		n := b.count(t, "true")
		return n == 0, fmt.Sprintf("%v rows left", n)
	})
	if got := streamCount(t, natstest.JetStream(t, nc), stream); got != 5 {
		t.Errorf("the stream holds %v messages, want 5: the broker drops the re-publishes by event ID", got)
	}
	if v, _ := value(t, b.reg, "outbox_relay_store_errors_total"); v < 1 {
		t.Errorf("outbox_relay_store_errors_total = %v, want the failed mark counted", v)
	}
	if code, body := b.get(t, "/metrics"); code != http.StatusOK || !strings.Contains(body, "outbox_unmarked_published_events_total 5") {
		t.Errorf("GET /metrics: %d, no outbox_unmarked_published_events_total 5", code)
	}
}
