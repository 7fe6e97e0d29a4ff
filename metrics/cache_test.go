package metrics_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxgo/outbox/metrics"
	"github.com/outboxgo/outbox/stores"
)

// countingStore counts the Stats calls that reach the real store.
type countingStore struct {
	stores.Store
	calls atomic.Int64
}

func (s *countingStore) Stats(ctx context.Context, p stores.StatsParams) ([]stores.TopicStats, error) {
	s.calls.Add(1)
	return s.Store.Stats(ctx, p)
}

// A storm of scrapes and readiness probes costs the database one query
// per StatsCacheTTL.
func TestStatsCache(t *testing.T) {
	b := setup(t, nil, nil)
	cs := &countingStore{Store: b.db.Store()}
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, &metrics.Options{Store: cs, StatsCacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, events("orders", 3)...)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := reg.Gather(); err != nil {
				t.Errorf("gather: %v", err)
			}
			if r := m.Ready(context.Background(), nil); r != "" {
				t.Errorf("not ready: %s", r)
			}
		})
	}
	wg.Wait()
	if n := cs.calls.Load(); n != 1 {
		t.Errorf("40 scrapes and probes made %d Stats calls, want 1", n)
	}
	if v, _ := value(t, reg, "outbox_pending_events", "topic", "orders"); v != 3 {
		t.Errorf("outbox_pending_events = %v, want 3", v)
	}
}
