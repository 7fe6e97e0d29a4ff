package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outboxgo/outbox/internal/redact"
)

// DefaultMaxLag is HealthOptions.MaxLag's default.
const DefaultMaxLag = 5 * time.Minute

// HealthOptions tune the readiness check. Nil, and every zero field, means
// the default.
type HealthOptions struct {
	// MaxLag is the oldest due event's age above which the relay counts as
	// stuck and /readyz fails. Default DefaultMaxLag (5m); negative turns
	// the check off. It needs Options.Store.
	MaxLag time.Duration
}

// Health returns the handler of the health endpoints. It serves every path
// ending in /healthz or /readyz (mount it at / or under a prefix):
//
//   - /healthz: 200 "ok" while the process serves HTTP (liveness).
//   - /readyz: 200 "ok", or 503 with a one-line reason, checked in this
//     order: the relay is paused because the broker was unavailable, or
//     refused the relay's configuration, at its last batch (known from
//     RelayHooks); the store's statistics cannot be read within
//     Options.StatsTimeout (the database is unreachable); the oldest due
//     event is older than MaxLag (the relay is stuck, or there is none).
//     With a CDC relay (RegisterCDC), its stream's pause, its slot and its
//     lag are checked before the store.
//
// The store is read through the same cache as the scrapes.
func (m *Metrics) Health(opts *HealthOptions) http.Handler {
	maxLag := DefaultMaxLag
	if opts != nil && opts.MaxLag != 0 {
		maxLag = opts.MaxLag
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/healthz"):
			reply(w, http.StatusOK, "ok")
		case strings.HasSuffix(r.URL.Path, "/readyz"):
			if reason := m.notReady(r.Context(), maxLag); reason != "" {
				reply(w, http.StatusServiceUnavailable, "not ready: "+reason)
				return
			}
			reply(w, http.StatusOK, "ok")
		default:
			http.NotFound(w, r)
		}
	})
}

func reply(w http.ResponseWriter, code int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, line)
}

// Ready reports why the process is not ready, as /readyz does; "" when it
// is.
func (m *Metrics) Ready(ctx context.Context, opts *HealthOptions) string {
	maxLag := DefaultMaxLag
	if opts != nil && opts.MaxLag != 0 {
		maxLag = opts.MaxLag
	}
	return m.notReady(ctx, maxLag)
}

func (m *Metrics) notReady(ctx context.Context, maxLag time.Duration) string {
	if p := m.paused(); p.paused {
		d := m.clock.Now().Sub(p.since).Round(time.Second)
		if p.refused {
			return fmt.Sprintf("relay paused for %v: the broker refused the relay's configuration (credentials, permissions or a missing target); %d events left pending", d, p.left)
		}
		return fmt.Sprintf("relay paused for %v: the broker is unavailable; %d events left pending", d, p.left)
	}
	if reason := m.cdcNotReady(maxLag); reason != "" {
		return reason
	}
	if m.opts.Store == nil {
		return ""
	}
	stats, err := m.coll.storeStats(ctx)
	if err != nil {
		return "database: " + oneLine(redact.Text(err.Error()))
	}
	if maxLag < 0 {
		return ""
	}
	now := m.clock.Now()
	var worst time.Duration
	var topic string
	for i := range stats {
		if o := stats[i].OldestDue; !o.IsZero() {
			if age := now.Sub(o); age > worst {
				worst, topic = age, stats[i].Topic
			}
		}
	}
	if worst > maxLag {
		return fmt.Sprintf("stuck: the oldest due event (topic %s) has waited %v, above %v", m.topics.label(topic), worst.Round(time.Second), maxLag)
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Handler returns the /metrics handler for g (a *prometheus.Registry is
// one): promhttp's, which answers with the error of a failed collection
// rather than a partial scrape.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// ServeMux returns a mux serving /metrics from g, and /healthz and
// /readyz (see Health): what a relay process exposes on its metrics
// address.
func (m *Metrics) ServeMux(g prometheus.Gatherer, opts *HealthOptions) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", Handler(g))
	h := m.Health(opts)
	mux.Handle("GET /healthz", h)
	mux.Handle("GET /readyz", h)
	return mux
}
