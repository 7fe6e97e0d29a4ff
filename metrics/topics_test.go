package metrics_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/relay"
)

func publishOK(t *testing.T, h relay.Hooks, topics ...string) {
	t.Helper()
	msgs := make([]outbox.Message, len(topics))
	for i, tp := range topics {
		msgs[i] = outbox.Message{Topic: tp}
	}
	h.AfterPublish(msgs, make([]error, len(msgs)))
}

// The topic label takes the first MaxTopics topics seen; the rest fold
// into "other".
func TestTopicCap(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, &metrics.Options{MaxTopics: 2})
	if err != nil {
		t.Fatal(err)
	}
	h := m.RelayHooks(relay.Hooks{})
	publishOK(t, h, "a", "b", "c", "d", "a", "")
	for topic, want := range map[string]float64{"a": 2, "b": 1, metrics.OtherTopic: 3} {
		if v, _ := value(t, reg, "outbox_published_events_total", "topic", topic); v != want {
			t.Errorf("published{%s} = %v, want %v", topic, v, want)
		}
	}
	if n := countSeries(t, reg, "outbox_published_events_total"); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}

// With an allow-list only its topics have a label value of their own.
func TestTopicAllowList(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, &metrics.Options{Topics: []string{"orders"}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.RelayHooks(relay.Hooks{})
	publishOK(t, h, "orders", "users", "orders")
	h.AfterPublish([]outbox.Message{{Topic: "x"}}, []error{errors.New("boom")})
	if v, _ := value(t, reg, "outbox_published_events_total", "topic", "orders"); v != 2 {
		t.Errorf("published{orders} = %v, want 2", v)
	}
	if v, _ := value(t, reg, "outbox_published_events_total", "topic", metrics.OtherTopic); v != 1 {
		t.Errorf("published{other} = %v, want 1", v)
	}
	if v, _ := value(t, reg, "outbox_publish_failures_total", "topic", metrics.OtherTopic, "reason", metrics.ReasonOther); v != 1 {
		t.Errorf("failures{other,other} = %v, want 1", v)
	}
}

// The program's own hooks still run, after the metrics'.
func TestHooksChain(t *testing.T) {
	m, err := metrics.New(prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var published, completed int
	h := m.RelayHooks(relay.Hooks{
		AfterPublish:  func(msgs []outbox.Message, _ []error) { published += len(msgs) },
		AfterComplete: func(relay.BatchResult) { completed++ },
	})
	publishOK(t, h, "a", "b")
	h.AfterComplete(relay.BatchResult{Claimed: 2, Published: 2})
	if published != 2 || completed != 1 {
		t.Errorf("the chained hooks saw %d published, %d completed; want 2, 1", published, completed)
	}
}

// Two Metrics in one registry collide, with a clear error; New refuses
// bad options.
func TestNewErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.New(reg, nil); err == nil {
		t.Error("a second Metrics in the same registry: no error")
	}
	if _, err := metrics.New(prometheus.NewRegistry(), &metrics.Options{Topics: []string{""}}); err == nil {
		t.Error("an empty topic in the allow-list: no error")
	}
	if _, err := metrics.New(nil, nil); err == nil {
		t.Error("a nil Registerer: no error")
	}
}

func countSeries(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}
