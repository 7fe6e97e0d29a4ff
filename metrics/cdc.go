package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
)

// CDCCounters are a CDC relay's counters since it started: the fields of
// pgcdc.Stats, which converts to this type as it is
// (metrics.CDCCounters(r.Stats())).
type CDCCounters struct {
	Decoded   int64 // outbox inserts decoded from the stream
	Delayed   int64 // of them, delayed events left to the due sweep
	Swept     int64 // delayed (or replayed) events the due sweep took
	Published int64 // events the broker acknowledged
	Retried   int64 // failed attempts scheduled for retry
	Dead      int64 // events made dead
	Outages   int64 // calls that found the broker unavailable or refusing
	Confirms  int64 // standby status updates that advanced the slot
	Restarts  int64 // stream sessions that ended in an error
	Unseen    int64 // marks that found rows not yet visible
}

// CDCReading is one reading of a change-data-capture relay (pgcdc.Relay)
// and its replication slot.
type CDCReading struct {
	// Active: the relay holds its slot and streams (false while it waits
	// as a hot standby or reconnects).
	Active bool
	// Behind is how long ago the oldest transaction the relay has read and
	// not finished committed (pgcdc.Relay.Behind): its lag in time.
	Behind time.Duration
	// Counters are the relay's counters (pgcdc.Relay.Stats).
	Counters CDCCounters
	// Slot says the fields below were read (pgcdc.Relay.Status succeeded,
	// or failed only because the slot is lost).
	Slot bool
	// SlotLagBytes is the server's WAL position minus the slot's confirmed
	// one; SlotRetainedBytes the WAL the slot keeps the server from
	// removing (pgcdc.SlotStatus Lag and Retained).
	SlotLagBytes, SlotRetainedBytes int64
	// SlotLost: the server invalidated the slot (wal_status lost).
	SlotLost bool
	// Paused: the stream is paused because the broker was unavailable,
	// or refused the relay's configuration (Refused), at its last probe,
	// since PausedSince (pgcdc.Relay.Paused).
	Paused, Refused bool
	PausedSince     time.Time
}

// CDCSource takes a CDCReading; its error says why the slot could not be
// read (the rest of the reading is reported anyway). The pgcdc relay's
// is, with pgcdc imported by the program (this module does not import it):
//
//	func(ctx context.Context) (metrics.CDCReading, error) {
//		rd := metrics.CDCReading{Active: r.Active(), Behind: r.Behind(), Counters: metrics.CDCCounters(r.Stats())}
//		rd.Paused, rd.Refused, rd.PausedSince = r.Paused()
//		st, err := r.Status(ctx)
//		rd.Slot = err == nil || errors.Is(err, pgcdc.ErrSlotLost)
//		rd.SlotLagBytes, rd.SlotRetainedBytes, rd.SlotLost = st.Lag, st.Retained, st.WALStatus == "lost"
//		return rd, err
//	}
type CDCSource func(ctx context.Context) (CDCReading, error)

// RegisterCDC registers with reg the metrics of a CDC relay, read from src
// on scrape through the same cache and timeout as the store's statistics
// (Options.StatsCacheTTL, Options.StatsTimeout): outbox_cdc_active,
// outbox_cdc_lag_seconds, outbox_cdc_slot_up, outbox_cdc_slot_lag_bytes,
// outbox_cdc_slot_retained_wal_bytes, outbox_cdc_slot_lost and a counter
// outbox_cdc_<name>_total per CDCCounters field. Feed the relay's
// Config.Hooks.AfterPublish with PublishHook for the publish counters and
// latency.
//
// The readiness check (Health, Ready) then also fails while the stream is
// paused, the slot cannot be read or is lost, or the relay's oldest
// unfinished transaction committed longer than MaxLag ago. A hot standby
// (not Active) is ready: waiting is its job.
func (m *Metrics) RegisterCDC(reg prometheus.Registerer, src CDCSource) error {
	if reg == nil || src == nil {
		return errors.New("metrics: RegisterCDC needs a Registerer and a CDCSource")
	}
	c := newCDCCollector(m, src)
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("metrics: register the CDC relay's metrics: %w", err)
	}
	m.mu.Lock()
	m.cdc = c
	m.mu.Unlock()
	return nil
}

// cdcNotReady is why the CDC relay registered with RegisterCDC, if any,
// is not ready; "" when it is, or when there is none.
func (m *Metrics) cdcNotReady(maxLag time.Duration) string {
	m.mu.Lock()
	c := m.cdc
	m.mu.Unlock()
	if c == nil {
		return ""
	}
	rd, err := c.read()
	switch {
	case rd.Paused && rd.Refused:
		return fmt.Sprintf("CDC stream paused for %v: the broker refused the relay's configuration (credentials, permissions or a missing target)",
			m.clock.Now().Sub(rd.PausedSince).Round(time.Second))
	case rd.Paused:
		return fmt.Sprintf("CDC stream paused for %v: the broker is unavailable", m.clock.Now().Sub(rd.PausedSince).Round(time.Second))
	case rd.SlotLost:
		return "replication slot lost: the server invalidated it (wal_status lost, see max_slot_wal_keep_size); the relay cannot stream until it is recreated (docs/cdc.md)"
	case !rd.Slot && err != nil:
		return "replication slot: " + oneLine(redact.Text(err.Error()))
	case maxLag >= 0 && rd.Behind > maxLag:
		return fmt.Sprintf("stuck: the CDC relay's oldest unfinished transaction committed %v ago, above %v", rd.Behind.Round(time.Second), maxLag)
	}
	return ""
}

// PublishHook returns a hook for a relay other than package relay's — the
// pgcdc relay's Config.Hooks.AfterPublish — that counts published events
// and publish failures by topic and observes the publish latency, as
// RelayHooks' AfterPublish does, then calls next (nil for none).
func (m *Metrics) PublishHook(next func(msgs []outbox.Message, errs []error)) func(msgs []outbox.Message, errs []error) {
	return func(msgs []outbox.Message, errs []error) {
		m.afterPublish(msgs, errs)
		if next != nil {
			next(msgs, errs)
		}
	}
}

// cdcCollector reports a CDC relay's reading on scrape.
type cdcCollector struct {
	m   *Metrics
	src CDCSource

	active, behind, slotUp, slotLag, slotRetained, slotLost *prometheus.Desc
	counters                                                []cdcCounter

	mu      sync.Mutex // held across a reading: one at a time
	readAt  time.Time  // wall clock: this is caching, not a timestamp
	reading CDCReading
	readErr error
}

type cdcCounter struct {
	d *prometheus.Desc
	v func(CDCCounters) int64
}

func newCDCCollector(m *Metrics, src CDCSource) *cdcCollector {
	g := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	c := &cdcCollector{m: m, src: src,
		active: g("outbox_cdc_active", "1 while the CDC relay holds its replication slot and streams; 0 while it waits as a hot standby or reconnects."),
		behind: g("outbox_cdc_lag_seconds", "How long ago the oldest transaction the CDC relay has read and not yet published, marked and made confirmable committed: its lag in time (0 when caught up, or not streaming)."),
		slotUp: g("outbox_cdc_slot_up", "1 when the last reading of the replication slot succeeded, 0 when it failed or timed out."),
		slotLag: g("outbox_cdc_slot_lag_bytes",
			"The server's current WAL position minus the slot's confirmed position: how far the CDC relay is behind, in bytes of WAL."),
		slotRetained: g("outbox_cdc_slot_retained_wal_bytes",
			"WAL the replication slot keeps the server from removing (current position minus restart_lsn): what a stopped relay costs the database's disk."),
		slotLost: g("outbox_cdc_slot_lost", "1 when the server invalidated the replication slot (wal_status lost, see max_slot_wal_keep_size): the relay cannot stream until the slot is recreated."),
	}
	for _, n := range []struct {
		name, help string
		v          func(CDCCounters) int64
	}{
		{"decoded_events", "Outbox inserts the CDC relay decoded from the write-ahead log.", func(s CDCCounters) int64 { return s.Decoded }},
		{"delayed_events", "Decoded events with a NotBefore ahead, left to the due sweep.", func(s CDCCounters) int64 { return s.Delayed }},
		{"swept_events", "Delayed (or replayed) events the due sweep took from the table.", func(s CDCCounters) int64 { return s.Swept }},
		{"published_events", "Events the broker acknowledged to the CDC relay.", func(s CDCCounters) int64 { return s.Published }},
		{"retried_events", "Failed publish attempts the CDC relay scheduled for a retry.", func(s CDCCounters) int64 { return s.Retried }},
		{"dead_events", "Events the CDC relay made dead.", func(s CDCCounters) int64 { return s.Dead }},
		{"outages", "Publish calls that found the broker unavailable or refusing (each pauses the stream).", func(s CDCCounters) int64 { return s.Outages }},
		{"confirms", "Standby status updates that advanced the slot's confirmed position.", func(s CDCCounters) int64 { return s.Confirms }},
		{"restarts", "Streaming sessions that ended in an error and were reconnected.", func(s CDCCounters) int64 { return s.Restarts }},
		{"unseen_marks", "Marks that found rows whose transaction the log delivered before it was visible (marked again once it is).", func(s CDCCounters) int64 { return s.Unseen }},
	} {
		c.counters = append(c.counters, cdcCounter{g("outbox_cdc_"+n.name+"_total", n.help), n.v})
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *cdcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.behind, c.slotUp, c.slotLag, c.slotRetained, c.slotLost} {
		ch <- d
	}
	for _, n := range c.counters {
		ch <- n.d
	}
}

// Collect implements prometheus.Collector.
func (c *cdcCollector) Collect(ch chan<- prometheus.Metric) {
	rd, _ := c.read()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(c.active, b2f(rd.Active))
	gauge(c.behind, max(rd.Behind.Seconds(), 0))
	gauge(c.slotUp, b2f(rd.Slot))
	if rd.Slot {
		gauge(c.slotLag, float64(rd.SlotLagBytes))
		gauge(c.slotRetained, float64(rd.SlotRetainedBytes))
		gauge(c.slotLost, b2f(rd.SlotLost))
	}
	for _, n := range c.counters {
		ch <- prometheus.MustNewConstMetric(n.d, prometheus.CounterValue, float64(n.v(rd.Counters)))
	}
}

// read takes a reading at most once per StatsCacheTTL, bounded by
// StatsTimeout, as the store's statistics are read.
func (c *cdcCollector) read() (CDCReading, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl := c.m.opts.StatsCacheTTL; ttl > 0 && !c.readAt.IsZero() && time.Since(c.readAt) < ttl {
		return c.reading, c.readErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.m.opts.StatsTimeout)
	defer cancel()
	rd, err := c.src(ctx)
	if err != nil {
		c.m.opts.Logger.Warn("metrics: reading the CDC relay's slot failed", "error", redact.Text(err.Error()))
	}
	c.reading, c.readErr, c.readAt = rd, err, time.Now()
	return rd, err
}
