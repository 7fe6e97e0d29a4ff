// Package metrics exposes an outbox's relay, store and subscribers to
// Prometheus, and serves the health endpoints a deployment probes. It is
// the only module of the project that imports the Prometheus client: the
// core packages report through hooks (relay.Hooks, subscribers.Hooks) and
// counters (relay.Stats, stores.Store.Stats), which this package turns
// into metrics.
//
// # Wiring
//
//	reg := prometheus.NewRegistry()
//	m, err := metrics.New(reg, &metrics.Options{Store: db.Store()})
//	r, err := relay.New(db.Store(), pub, &relay.Config{Hooks: m.RelayHooks(relay.Hooks{})})
//	m.SetRelay(r)
//	go http.ListenAndServe(":9090", m.ServeMux(reg, nil)) // /metrics, /healthz, /readyz
//
// A consumer passes m.SubscriberHooks(subscribers.Hooks{}) as its
// subscriber's Options.Hooks. Both hook functions take the program's own
// hooks, which run after the metrics'.
//
// # Metrics
//
// Every name starts with outbox_. The relay's hooks feed counters of
// published events (by topic), publish failures (by topic and reason:
// unavailable, refused, permanent, other), retries, dead-lettered and
// deferred events, events whose mark failed after the broker acknowledged
// them (they are published again), and histograms of batch sizes, batch
// durations (claim to completion), each step's duration (claim, publish,
// complete) and the latency from an event's creation to the broker's
// acknowledgement. On each scrape a collector reads the store's statistics
// (pending, due, scheduled, retrying and dead events, the age of the
// oldest due event: the lag, and the keys blocked by a failing head) through a cache of Options.StatsCacheTTL
// (default 5s) with a timeout of Options.StatsTimeout, so a burst of
// scrapes costs the database one query; it also reports the relay's own
// counters (claims, batches, outages, refusals, store errors) and whether
// the relay is paused now. The subscriber's hooks count settled
// deliveries by action and the duplicates the inbox dropped.
// docs/operations.md in the repository lists each metric, its type,
// labels and meaning.
//
// # Label values
//
// The topic label is bounded: with Options.Topics, each topic of that
// allow-list is its own value and every other topic is "other"; without
// it the first Options.MaxTopics (default 50) distinct topics this Metrics
// sees have their own value, in the order it sees them, and the rest are
// "other". An empty topic (a message a subscriber could not decode) is
// "other" too. The reason and action labels take fixed values.
//
// # Health
//
// Health serves /healthz (200 while the process serves HTTP) and /readyz:
// 503 with a one-line reason when the relay is paused because its last
// batch found the broker unavailable or refusing the relay's
// configuration, when the store cannot be read within StatsTimeout, or
// when the oldest due event is older than HealthOptions.MaxLag (default
// 5m); 200 otherwise. The pause is known from the relay's hooks
// (relay.BatchResult), since relay.Stats counts outages but does not say
// whether the relay is paused now.
package metrics
