package metrics_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/metrics"
)

// A CDC relay's reading becomes its gauges and counters on scrape, read
// once per cache period; a slot that cannot be read leaves the slot's
// gauges out and says so in outbox_cdc_slot_up.
func TestCDCMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, &metrics.Options{StatsCacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int64
	var slotErr atomic.Bool
	src := func(context.Context) (metrics.CDCReading, error) {
		reads.Add(1)
		rd := metrics.CDCReading{Active: true, Behind: 1500 * time.Millisecond,
			Counters: metrics.CDCCounters{Decoded: 7, Published: 5, Dead: 1, Confirms: 3}}
		if slotErr.Load() {
			return rd, errors.New("the database is down")
		}
		rd.Slot, rd.SlotLagBytes, rd.SlotRetainedBytes = true, 4096, 65536
		return rd, nil
	}
	if err := m.RegisterCDC(reg, src); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"outbox_cdc_active": 1, "outbox_cdc_lag_seconds": 1.5, "outbox_cdc_slot_up": 1,
		"outbox_cdc_slot_lag_bytes": 4096, "outbox_cdc_slot_retained_wal_bytes": 65536, "outbox_cdc_slot_lost": 0,
		"outbox_cdc_decoded_events_total": 7, "outbox_cdc_published_events_total": 5, "outbox_cdc_dead_events_total": 1,
		"outbox_cdc_confirms_total": 3, "outbox_cdc_restarts_total": 0,
	} {
		if got, ok := value(t, reg, name); !ok || got != want {
			t.Errorf("%s = %v (reported: %v), want %v", name, got, ok, want)
		}
	}

	slotErr.Store(true)
	if got, _ := value(t, reg, "outbox_cdc_slot_up"); got != 0 {
		t.Errorf("outbox_cdc_slot_up = %v with the slot unreadable, want 0", got)
	}
	if _, ok := value(t, reg, "outbox_cdc_slot_lag_bytes"); ok {
		t.Error("outbox_cdc_slot_lag_bytes reported with the slot unreadable")
	}
	if got, _ := value(t, reg, "outbox_cdc_published_events_total"); got != 5 {
		t.Errorf("outbox_cdc_published_events_total = %v with the slot unreadable, want 5 (the relay's counters still count)", got)
	}

	// A cache period serves every scrape in it with one reading.
	reg2 := prometheus.NewRegistry()
	m2, err := metrics.New(reg2, &metrics.Options{StatsCacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.RegisterCDC(reg2, src); err != nil {
		t.Fatal(err)
	}
	before := reads.Load()
	for range 5 {
		value(t, reg2, "outbox_cdc_active")
	}
	if n := reads.Load() - before; n != 1 {
		t.Errorf("5 scrapes in one cache period read the relay %d times, want 1", n)
	}
	if err := m2.RegisterCDC(reg2, src); err == nil {
		t.Error("registering the CDC metrics twice in one registry succeeded")
	}
}

// PublishHook feeds the publish counters and the latency, as the polling
// relay's hooks do.
func TestCDCPublishHook(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var next int
	h := m.PublishHook(func([]outbox.Message, []error) { next++ })
	msgs := []outbox.Message{{Topic: "a", CreatedAt: time.Now()}, {Topic: "a", CreatedAt: time.Now()}}
	h(msgs, []error{nil, errors.New("no")})
	if got, _ := value(t, reg, "outbox_published_events_total", "topic", "a"); got != 1 {
		t.Errorf("published = %v, want 1", got)
	}
	if got, _ := value(t, reg, "outbox_publish_failures_total", "topic", "a", "reason", metrics.ReasonOther); got != 1 {
		t.Errorf("failures = %v, want 1", got)
	}
	if got, _ := value(t, reg, "outbox_publish_latency_seconds"); got != 1 {
		t.Errorf("latency observations = %v, want 1", got)
	}
	if next != 1 {
		t.Errorf("the next hook ran %d times, want 1", next)
	}
}

// /readyz of a CDC relay fails while its stream is paused (saying whether
// the broker is down or refused the configuration), while its slot is lost
// or unreadable, and while it lags more than MaxLag; a hot standby, and a
// relay caught up, are ready.
func TestCDCReadiness(t *testing.T) {
	clock := &fixedClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	m, err := metrics.New(prometheus.NewRegistry(), &metrics.Options{StatsCacheTTL: -1, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var rd atomic.Pointer[metrics.CDCReading]
	var readErr atomic.Pointer[error]
	src := func(context.Context) (metrics.CDCReading, error) {
		if e := readErr.Load(); e != nil {
			return *rd.Load(), *e
		}
		return *rd.Load(), nil
	}
	if err := m.RegisterCDC(prometheus.NewRegistry(), src); err != nil {
		t.Fatal(err)
	}
	opts := &metrics.HealthOptions{MaxLag: time.Minute}
	for _, c := range []struct {
		name string
		rd   metrics.CDCReading
		err  error
		want string // "" ready, else a part of the reason
	}{
		{"streaming, caught up", metrics.CDCReading{Active: true, Slot: true}, nil, ""},
		{"hot standby", metrics.CDCReading{Slot: true}, nil, ""},
		{"broker down", metrics.CDCReading{Active: true, Slot: true, Paused: true, PausedSince: clock.t.Add(-90 * time.Second)}, nil,
			"CDC stream paused for 1m30s: the broker is unavailable"},
		{"broker refuses", metrics.CDCReading{Active: true, Slot: true, Paused: true, Refused: true, PausedSince: clock.t}, nil,
			"the broker refused the relay's configuration"},
		{"slot lost", metrics.CDCReading{Slot: true, SlotLost: true}, errors.New("pgcdc: slot lost"), "replication slot lost"},
		{"slot unreadable", metrics.CDCReading{Active: true}, errors.New("dial tcp 127.0.0.1:5432: connection refused"),
			"replication slot: dial tcp 127.0.0.1:5432: connection refused"},
		{"lagging", metrics.CDCReading{Active: true, Slot: true, Behind: 2 * time.Minute}, nil,
			"stuck: the CDC relay's oldest unfinished transaction committed 2m0s ago, above 1m0s"},
	} {
		rd.Store(&c.rd)
		if c.err != nil {
			readErr.Store(&c.err)
		} else {
			readErr.Store(nil)
		}
		got := m.Ready(context.Background(), opts)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: Ready = %q, want %q", c.name, got, c.want)
		}
	}
}

// fixedClock is a clock that stands still.
type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }
