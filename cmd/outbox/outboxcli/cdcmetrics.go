package outboxcli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/pgcdc"
)

// serveCDC serves /metrics, /healthz and /readyz for the CDC relay r (its
// counters, lag and slot, beside the store's backlog) until the returned
// stop is called.
func (rm *relayMetrics) serveCDC(r *pgcdc.Relay, maxLag time.Duration, log *slog.Logger) (stop func(), err error) {
	if err := rm.m.RegisterCDC(rm.reg, cdcSource(r)); err != nil {
		return nil, err
	}
	return rm.start(maxLag, log), nil
}

// cdcSource reads r for the metrics.
func cdcSource(r *pgcdc.Relay) metrics.CDCSource {
	return func(ctx context.Context) (metrics.CDCReading, error) {
		rd := metrics.CDCReading{Active: r.Active(), Behind: r.Behind(), Counters: metrics.CDCCounters(r.Stats())}
		rd.Paused, rd.Refused, rd.PausedSince = r.Paused()
		st, err := r.Status(ctx)
		rd.Slot = err == nil || errors.Is(err, pgcdc.ErrSlotLost)
		rd.SlotLagBytes, rd.SlotRetainedBytes, rd.SlotLost = st.Lag, st.Retained, st.WALStatus == "lost"
		return rd, err
	}
}
