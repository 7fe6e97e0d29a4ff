package ui

import (
	"context"
	"sync"
	"time"

	"github.com/outboxgo/outbox/stores"
)

// sample is one point of the charts.
type sample struct {
	at      time.Time
	pending int64
	dead    int64
	lag     time.Duration
	// published sums the published counters of this process's relays;
	// relays says whether there are any (throughput is known only then).
	published int64
	relays    bool
}

// history is a bounded ring of samples, oldest first.
type history struct {
	mu    sync.Mutex
	buf   []sample
	start int // index of the oldest sample
	n     int
}

func newHistory(size int) *history { return &history{buf: make([]sample, size)} }

func (h *history) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n < len(h.buf) {
		h.buf[(h.start+h.n)%len(h.buf)] = s
		h.n++
		return
	}
	h.buf[h.start] = s
	h.start = (h.start + 1) % len(h.buf)
}

// samples returns a copy of the samples, oldest first.
func (h *history) samples() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, h.n)
	for i := range out {
		out[i] = h.buf[(h.start+i)%len(h.buf)]
	}
	return out
}

// last returns the newest sample's time; zero when there is none.
func (h *history) last() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return time.Time{}
	}
	return h.buf[(h.start+h.n-1)%len(h.buf)].at
}

// Run samples the store's statistics every Options.SampleEvery for the
// charts until ctx is done, so that they show what happened before anyone
// opened the page; it returns ctx's error. Without Run the charts sample
// only while a page is open.
func (d *Dashboard) Run(ctx context.Context) error {
	t := time.NewTicker(d.opts.SampleEvery)
	defer t.Stop()
	for {
		d.sampleIfDue(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sampleIfDue takes a sample unless the last one is more recent than half
// of SampleEvery (Run and open pages both sample). It returns the store's
// statistics it read, nil when it took no sample.
func (d *Dashboard) sampleIfDue(ctx context.Context) []stores.TopicStats {
	now := d.opts.Clock.Now()
	if last := d.hist.last(); !last.IsZero() && now.Sub(last) < d.opts.SampleEvery/2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	st, err := d.opts.Store.Stats(ctx, stores.StatsParams{Now: now})
	if err != nil {
		if ctx.Err() == nil {
			d.opts.Logger.Warn("ui: reading the outbox's statistics failed", "error", err)
		}
		return nil
	}
	d.record(now, st)
	return st
}

// record adds the sample of st, read at now.
func (d *Dashboard) record(now time.Time, st []stores.TopicStats) {
	t := sum(st)
	s := sample{at: now, pending: t.Pending, dead: t.Dead, lag: lag(t.OldestDue, now)}
	for _, r := range d.relaySources() {
		s.published += r.stats().Published
		s.relays = true
	}
	d.hist.add(s)
}

// sum totals the topics: counts add up, the oldest times are the earliest.
func sum(st []stores.TopicStats) stores.TopicStats {
	var t stores.TopicStats
	for _, ts := range st {
		t.Pending += ts.Pending
		t.Due += ts.Due
		t.Scheduled += ts.Scheduled
		t.Retrying += ts.Retrying
		t.Dead += ts.Dead
		t.Published += ts.Published
		t.OldestPending = earliest(t.OldestPending, ts.OldestPending)
		t.OldestDue = earliest(t.OldestDue, ts.OldestDue)
	}
	return t
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// lag is how long the oldest due event has waited; zero when none is due.
func lag(oldestDue, now time.Time) time.Duration {
	if oldestDue.IsZero() || now.Before(oldestDue) {
		return 0
	}
	return now.Sub(oldestDue)
}
