package metrics

import (
	"sync"
	"time"

	"github.com/outboxgo/outbox/relay"
)

// pauseState is what the relay's hooks tell of its circuit breaker: a
// batch that found the broker unavailable, or refusing the relay's
// configuration, pauses the relay as a whole; the next batch the broker
// answers resumes it. It stands in for relay.Stats's Paused until SetRelay
// names the relay (see Metrics.paused).
type pauseState struct {
	mu      sync.Mutex
	paused  bool
	refused bool      // the pause is a refusal, not an outage
	since   time.Time // when the pause began
	left    int       // events the last batch left pending for it
}

// batch records one completed batch.
func (p *pauseState) batch(res relay.BatchResult, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case res.Refused > 0 || res.Unavailable > 0:
		if !p.paused {
			p.since = now
		}
		p.paused, p.refused, p.left = true, res.Refused > 0, res.Refused+res.Unavailable+res.Deferred
	case res.Claimed > 0:
		p.paused, p.refused, p.left = false, false, 0
	}
}

// pauseInfo is a snapshot of pauseState.
type pauseInfo struct {
	paused, refused bool
	since           time.Time
	left            int
}

func (p *pauseState) get() pauseInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pauseInfo{paused: p.paused, refused: p.refused, since: p.since, left: p.left}
}

// paused is the relay's pause now: its breaker's state (relay.Stats) once
// SetRelay named it, else what its hooks told.
func (m *Metrics) paused() pauseInfo {
	if r := m.getRelay(); r != nil {
		st := r.Stats()
		return pauseInfo{paused: st.Paused, refused: st.Refused, since: st.PausedSince, left: m.pause.get().left}
	}
	return m.pause.get()
}
