package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// collector reports, on scrape, the store's backlog (through a cache), the
// relay's counters and the pause the relay's hooks saw.
type collector struct {
	m *Metrics

	pending, due, scheduled, retrying, dead, lag, storeUp *prometheus.Desc
	claims, batches, outages, refusals, storeErrors       *prometheus.Desc
	paused, blocked                                       *prometheus.Desc

	// hooked is set once RelayHooks was called: only then is
	// outbox_relay_paused reported.
	hooked atomic.Bool

	mu       sync.Mutex // held across a read of the store: one at a time
	readAt   time.Time  // wall clock: this is caching, not a timestamp
	stats    []stores.TopicStats
	statsErr error
	// blockedKeys are the blocked keys the last read found; blockedOK
	// says that read succeeded.
	blockedKeys []stores.BlockedKey
	blockedOK   bool
}

func newCollector(m *Metrics) *collector {
	topic := []string{"topic"}
	return &collector{
		m:         m,
		pending:   prometheus.NewDesc("outbox_pending_events", "Events not yet published, due or not, by topic (read from the store on scrape).", topic, nil),
		due:       prometheus.NewDesc("outbox_due_events", "Pending events the relay may publish now, by topic.", topic, nil),
		scheduled: prometheus.NewDesc("outbox_scheduled_events", "Pending events not due yet (a NotBefore ahead, or a retry's backoff), by topic.", topic, nil),
		retrying:  prometheus.NewDesc("outbox_retrying_events", "Pending events that failed at least once, by topic.", topic, nil),
		dead:      prometheus.NewDesc("outbox_dead_events", "Dead events kept in the store (replayable), by topic.", topic, nil),
		lag: prometheus.NewDesc("outbox_oldest_due_event_age_seconds",
			"Age of the oldest due pending event, by topic: the relay's lag (0 when nothing is due; an event scheduled ahead is no lag). By the relay's clock: it includes any clock skew with the writer.", topic, nil),
		storeUp: prometheus.NewDesc("outbox_store_up", "1 when the last read of the store's statistics succeeded, 0 when it failed or timed out.", nil, nil),

		claims:      prometheus.NewDesc("outbox_relay_claims_total", "Claims the relay made, empty ones included.", nil, nil),
		batches:     prometheus.NewDesc("outbox_relay_batches_total", "Non-empty batches the relay completed.", nil, nil),
		outages:     prometheus.NewDesc("outbox_relay_outages_total", "Batches that found the broker unavailable (each pauses the relay).", nil, nil),
		refusals:    prometheus.NewDesc("outbox_relay_refusals_total", "Batches the broker refused for the relay's configuration (each pauses the relay).", nil, nil),
		storeErrors: prometheus.NewDesc("outbox_relay_store_errors_total", "Claims or completions of the relay that failed in the store.", nil, nil),
		blocked: prometheus.NewDesc("outbox_blocked_keys",
			"Keys held back by a failing head (their oldest pending event failed at least once), by the head's topic: in ordered mode each publishes nothing more until its head succeeds or is dead-lettered. Counts at most Options.MaxBlockedKeys (default 1000).", topic, nil),
		paused: prometheus.NewDesc("outbox_relay_paused",
			"1 while the relay is paused as a whole, by reason: unavailable (the broker is down) or refused (the broker refuses the relay's configuration); 0 otherwise.", []string{"reason"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.due, c.scheduled, c.retrying, c.dead, c.lag, c.storeUp,
		c.claims, c.batches, c.outages, c.refusals, c.storeErrors, c.paused, c.blocked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.m.opts.Store != nil {
		c.collectStore(ch)
	}
	if r := c.m.getRelay(); r != nil {
		st := r.Stats()
		for _, v := range []struct {
			d *prometheus.Desc
			n int64
		}{{c.claims, st.Claims}, {c.batches, st.Batches}, {c.outages, st.Outages}, {c.refusals, st.Refusals}, {c.storeErrors, st.StoreErrors}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n))
		}
	}
	if c.hooked.Load() {
		p := c.m.paused()
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, b2f(p.paused && !p.refused), ReasonUnavailable)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, b2f(p.paused && p.refused), ReasonRefused)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// topicBacklog is one label value's share of the store's statistics.
type topicBacklog struct {
	pending, due, scheduled, retrying, dead int64
	oldestDue                               time.Time
}

func (c *collector) collectStore(ch chan<- prometheus.Metric) {
	stats, err := c.storeStats(context.Background())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.storeUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.storeUp, prometheus.GaugeValue, 1)
	c.collectBlocked(ch)
	now := c.m.clock.Now()
	byLabel := map[string]*topicBacklog{}
	var order []string
	for i := range stats {
		s := &stats[i]
		l := c.m.topics.label(s.Topic)
		b := byLabel[l]
		if b == nil {
			b = &topicBacklog{}
			byLabel[l] = b
			order = append(order, l)
		}
		b.pending += s.Pending
		b.due += s.Due
		b.scheduled += s.Scheduled
		b.retrying += s.Retrying
		b.dead += s.Dead
		if !s.OldestDue.IsZero() && (b.oldestDue.IsZero() || s.OldestDue.Before(b.oldestDue)) {
			b.oldestDue = s.OldestDue
		}
	}
	for _, l := range order {
		b := byLabel[l]
		lag := 0.0
		if !b.oldestDue.IsZero() {
			lag = max(now.Sub(b.oldestDue).Seconds(), 0)
		}
		for _, v := range []struct {
			d *prometheus.Desc
			v float64
		}{{c.pending, float64(b.pending)}, {c.due, float64(b.due)}, {c.scheduled, float64(b.scheduled)},
			{c.retrying, float64(b.retrying)}, {c.dead, float64(b.dead)}, {c.lag, lag}} {
			ch <- prometheus.MustNewConstMetric(v.d, prometheus.GaugeValue, v.v, l)
		}
	}
}

// storeStats returns the store's statistics, read at most once per
// StatsCacheTTL whatever the number of callers: concurrent callers wait
// for the one read in flight. A failed read is cached too, so a database
// that is down is not hammered either. The read does not end with ctx (a
// probe that gave up would leave its cancellation cached for the others):
// StatsTimeout bounds it.
func (c *collector) storeStats(ctx context.Context) ([]stores.TopicStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl := c.m.opts.StatsCacheTTL; ttl > 0 && !c.readAt.IsZero() && time.Since(c.readAt) < ttl {
		return c.stats, c.statsErr
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.m.opts.StatsTimeout)
	defer cancel()
	stats, err := c.m.opts.Store.Stats(ctx, stores.StatsParams{Now: c.m.clock.Now()})
	if err != nil {
		c.m.opts.Logger.Warn("metrics: reading the outbox's statistics failed", "error", redact.Text(err.Error()))
	}
	c.blockedKeys, c.blockedOK = nil, false
	if err == nil && c.m.opts.MaxBlockedKeys > 0 {
		bl, berr := c.m.opts.Store.Blocked(ctx, stores.BlockedParams{Limit: c.m.opts.MaxBlockedKeys})
		if berr != nil {
			c.m.opts.Logger.Warn("metrics: reading the outbox's blocked keys failed", "error", redact.Text(berr.Error()))
		}
		c.blockedKeys, c.blockedOK = bl, berr == nil
	}
	c.stats, c.statsErr, c.readAt = stats, err, time.Now()
	return stats, err
}

// collectBlocked reports the blocked keys of the last read, by topic
// label, every label of the read's topics included (with 0), so that a
// key that is no longer blocked brings its series to 0, not away. It
// reports nothing when that read of the blocked keys failed. Called after
// storeStats, it reads the cache under its lock.
func (c *collector) collectBlocked(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.blockedOK {
		return
	}
	counts := map[string]int{}
	var order []string
	add := func(topic string, n int) {
		l := c.m.topics.label(topic)
		if _, ok := counts[l]; !ok {
			order = append(order, l)
		}
		counts[l] += n
	}
	for i := range c.stats {
		add(c.stats[i].Topic, 0)
	}
	for i := range c.blockedKeys {
		add(c.blockedKeys[i].Head.Topic, 1)
	}
	for _, l := range order {
		ch <- prometheus.MustNewConstMetric(c.blocked, prometheus.GaugeValue, float64(counts[l]), l)
	}
}
