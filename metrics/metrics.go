package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// Defaults for Options.
const (
	// DefaultMaxTopics is how many distinct topics get a label value of
	// their own when Options.Topics is empty.
	DefaultMaxTopics = 50
	// DefaultStatsTimeout bounds one read of the store's statistics.
	DefaultStatsTimeout = 5 * time.Second
	// DefaultStatsCacheTTL is how long one read of the store's statistics
	// serves scrapes and readiness probes.
	DefaultStatsCacheTTL = 5 * time.Second
	// DefaultMaxBlockedKeys is how many blocked keys one read of the
	// store counts at most.
	DefaultMaxBlockedKeys = 1000
	// OtherTopic is the label value of every topic past the allow-list or
	// the cap.
	OtherTopic = "other"
)

// Default histogram buckets.
var (
	// DefaultLatencyBuckets are outbox_publish_latency_seconds's: 1 ms to
	// about 2 min.
	DefaultLatencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 14)
	// DefaultBatchDurationBuckets are outbox_batch_duration_seconds's: 1 ms
	// to about 16 s.
	DefaultBatchDurationBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)
	// DefaultBatchSizeBuckets are outbox_batch_size's: 1 to 10,000 events.
	DefaultBatchSizeBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
	// DefaultStepBuckets are the buckets of outbox_claim_duration_seconds,
	// outbox_publish_duration_seconds and outbox_complete_duration_seconds:
	// 0.25 ms to about 16 s.
	DefaultStepBuckets = prometheus.ExponentialBuckets(0.00025, 2, 17)
)

// Options configure Metrics. Nil, and every zero field, means the default.
type Options struct {
	// Topics is the allow-list of topics that get a label value of their
	// own; every other topic is counted under OtherTopic ("other").
	// Default none: the first MaxTopics distinct topics this Metrics sees
	// get their own value, in the order it sees them, and the rest are
	// "other".
	Topics []string
	// MaxTopics caps the distinct topic label values when Topics is
	// empty. Default DefaultMaxTopics (50); negative means no cap (only
	// for a program whose topics are few and fixed).
	MaxTopics int
	// Store, when set, is read on scrape (Store.Stats) for the backlog
	// gauges and the lag, and by the readiness check. Default nil: no
	// backlog gauges.
	Store stores.Store
	// StatsTimeout bounds one Store.Stats call. Default
	// DefaultStatsTimeout (5s).
	StatsTimeout time.Duration
	// StatsCacheTTL is how long one Store.Stats result serves scrapes and
	// readiness checks, so a burst of scrapes costs the database one
	// query. Default DefaultStatsCacheTTL (5s); negative reads the store
	// on every scrape.
	StatsCacheTTL time.Duration
	// Clock tells the time for ages and latencies. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives a failed read of the store's statistics, at Warn.
	// Default: discarded.
	Logger *slog.Logger
	// LatencyBuckets, BatchDurationBuckets and BatchSizeBuckets are the
	// histograms' buckets. Default DefaultLatencyBuckets,
	// DefaultBatchDurationBuckets, DefaultBatchSizeBuckets.
	LatencyBuckets, BatchDurationBuckets, BatchSizeBuckets []float64
	// StepBuckets are the buckets of the claim, publish and complete
	// durations. Default DefaultStepBuckets.
	StepBuckets []float64
	// MaxBlockedKeys caps the keys one read of the store counts for
	// outbox_blocked_keys (Store.Blocked's limit; the read's cost grows
	// with it). Default DefaultMaxBlockedKeys (1000); negative: no
	// outbox_blocked_keys.
	MaxBlockedKeys int
}

func (o *Options) withDefaults() (Options, error) {
	var out Options
	if o != nil {
		out = *o
	}
	if out.MaxTopics == 0 {
		out.MaxTopics = DefaultMaxTopics
	}
	if out.StatsTimeout == 0 {
		out.StatsTimeout = DefaultStatsTimeout
	}
	if out.StatsCacheTTL == 0 {
		out.StatsCacheTTL = DefaultStatsCacheTTL
	}
	if out.Clock == nil {
		out.Clock = outbox.SystemClock{}
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.LatencyBuckets == nil {
		out.LatencyBuckets = DefaultLatencyBuckets
	}
	if out.BatchDurationBuckets == nil {
		out.BatchDurationBuckets = DefaultBatchDurationBuckets
	}
	if out.BatchSizeBuckets == nil {
		out.BatchSizeBuckets = DefaultBatchSizeBuckets
	}
	if out.StepBuckets == nil {
		out.StepBuckets = DefaultStepBuckets
	}
	if out.MaxBlockedKeys == 0 {
		out.MaxBlockedKeys = DefaultMaxBlockedKeys
	}
	var errs []error
	if out.StatsTimeout < 0 {
		errs = append(errs, fmt.Errorf("StatsTimeout %v: must not be negative", out.StatsTimeout))
	}
	for _, t := range out.Topics {
		if t == "" {
			errs = append(errs, errors.New("Topics: an empty topic"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("metrics: options: %w", err)
	}
	return out, nil
}

// Metrics holds the outbox's Prometheus metrics: the relay's and the
// subscriber's (fed by their hooks), the store's backlog (read on
// scrape) and the relay's own counters. Its methods are safe for
// concurrent use.
type Metrics struct {
	opts   Options
	topics *topicLabels
	clock  outbox.Clock

	published        *prometheus.CounterVec
	failures         *prometheus.CounterVec
	retried          prometheus.Counter
	deadLettered     prometheus.Counter
	deferred         prometheus.Counter
	batchSize        prometheus.Histogram
	batchDuration    prometheus.Histogram
	publishLatency   prometheus.Histogram
	claimDuration    prometheus.Histogram
	publishDuration  prometheus.Histogram
	completeDuration prometheus.Histogram
	unmarked         prometheus.Counter

	deliveries *prometheus.CounterVec
	duplicates *prometheus.CounterVec

	pause *pauseState
	coll  *collector

	mu    sync.Mutex
	relay *relay.Relay
	cdc   *cdcCollector // RegisterCDC's, if called
}

// New makes the metrics and registers them with reg. opts may be nil.
// Every name starts with outbox_; two Metrics in one registry collide,
// unless each is given its own const labels through
// prometheus.WrapRegistererWith.
func New(reg prometheus.Registerer, opts *Options) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil Registerer")
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Metrics{opts: o, topics: newTopicLabels(o.Topics, o.MaxTopics), clock: o.Clock, pause: &pauseState{}}
	m.published = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outbox_published_events_total",
		Help: "Events the broker acknowledged, by topic (counted at the acknowledgement, before the mark: an event whose mark failed is published, and counted, again).",
	}, []string{"topic"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outbox_publish_failures_total",
		Help: "Failed publishes of events, by topic and reason: unavailable (broker down, uncharged), refused (broker refused the relay's configuration, uncharged), permanent (the broker will never take the event: dead at once), other (retried with backoff).",
	}, []string{"topic", "reason"})
	m.retried = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "outbox_retried_events_total",
		Help: "Failed publish attempts the relay scheduled for a retry.",
	})
	m.deadLettered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "outbox_dead_lettered_events_total",
		Help: "Events the relay made dead (attempts exhausted, or rejected permanently).",
	})
	m.deferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "outbox_deferred_events_total",
		Help: "Events claimed but not sent in their batch, left pending and uncharged (an earlier event of their key failed, the broker went away, or the batch's publish time ran short).",
	})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_batch_size",
		Help:    "Events claimed per non-empty batch.",
		Buckets: o.BatchSizeBuckets,
	})
	m.batchDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_batch_duration_seconds",
		Help:    "Time from a batch's claim to its completion in the store.",
		Buckets: o.BatchDurationBuckets,
	})
	m.publishLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_publish_latency_seconds",
		Help:    "Time from an event's creation (its enqueue in the writer's transaction, or its NotBefore when later) to the broker's acknowledgement, by the relay's clock: it includes any clock skew between the writer and the relay, and retry backoff.",
		Buckets: o.LatencyBuckets,
	})
	m.claimDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_claim_duration_seconds",
		Help:    "Time one claim took in the store, empty and failed ones included.",
		Buckets: o.StepBuckets,
	})
	m.publishDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_publish_duration_seconds",
		Help:    "Time a non-empty batch's publish took, from its first send to the broker's last acknowledgement (or the publish timeout).",
		Buckets: o.StepBuckets,
	})
	m.completeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "outbox_complete_duration_seconds",
		Help:    "Time the store took to record a batch's outcome (mark or delete published events, schedule retries, make dead), failed completions included.",
		Buckets: o.StepBuckets,
	})
	m.unmarked = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "outbox_unmarked_published_events_total",
		Help: "Events the broker acknowledged whose mark failed in the store: each is published again once its claim expires (a duplicate the inbox drops; the at-least-once cost).",
	})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outbox_subscriber_deliveries_total",
		Help: "Deliveries a subscriber settled, by topic and action: ack (handled, or a duplicate), retry, dead-letter, release (a stop cut the handler short).",
	}, []string{"topic", "action"})
	m.duplicates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outbox_inbox_duplicates_total",
		Help: "Deliveries the inbox dropped as duplicates of a message handled before, by topic: the cost of at-least-once delivery.",
	}, []string{"topic"})
	m.coll = newCollector(m)
	cs := []prometheus.Collector{m.published, m.failures, m.retried, m.deadLettered, m.deferred,
		m.batchSize, m.batchDuration, m.publishLatency, m.claimDuration, m.publishDuration, m.completeDuration,
		m.unmarked, m.deliveries, m.duplicates, m.coll}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return m, nil
}

// SetRelay makes the metrics report r's counters (relay.Stats) on scrape.
// Call it once relay.New has returned (the relay's Config takes
// RelayHooks first).
func (m *Metrics) SetRelay(r *relay.Relay) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.relay = r
}

func (m *Metrics) getRelay() *relay.Relay {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.relay
}
