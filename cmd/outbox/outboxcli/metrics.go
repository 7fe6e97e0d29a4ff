package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// relayMetrics are the relay's metrics and health endpoints, served on
// --metrics-addr.
type relayMetrics struct {
	reg *prometheus.Registry
	m   *metrics.Metrics
	ln  net.Listener
}

// listenMetrics binds --metrics-addr, so that a taken port fails at start
// in one line, and makes the metrics of store, beside the Go runtime's and
// the process's.
func listenMetrics(ctx context.Context, addr string, store stores.Store, log *slog.Logger) (*relayMetrics, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.New(reg, &metrics.Options{Store: store, Logger: log})
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &relayMetrics{reg: reg, m: m, ln: ln}, nil
}

// serve serves /metrics, /healthz and /readyz for r until the returned
// stop is called.
func (rm *relayMetrics) serve(r *relay.Relay, maxLag time.Duration, log *slog.Logger) (stop func()) {
	rm.m.SetRelay(r)
	return rm.start(maxLag, log)
}

// start serves /metrics, /healthz and /readyz until the returned stop is
// called.
func (rm *relayMetrics) start(maxLag time.Duration, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: rm.m.ServeMux(rm.reg, &metrics.HealthOptions{MaxLag: maxLag}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(rm.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "error", err)
		}
	}()
	log.Info("serving metrics", "addr", rm.ln.Addr().String(), "paths", "/metrics /healthz /readyz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
