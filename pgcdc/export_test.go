package pgcdc

import (
	"fmt"
	"time"
)

// SweepSQL is sweepSQL, for the external tests.
var SweepSQL = sweepSQL

// State describes r's engine and counters, for a test that timed out.
func State(r *Relay) string {
	e := r.eng
	e.mu.Lock()
	defer e.mu.Unlock()
	busy := 0
	for _, q := range e.keys {
		if q.busy {
			busy++
		}
	}
	return fmt.Sprintf("active=%t epoch=%d events=%d keys=%d busy=%d txns=%d calls=%d marks=%d confirmable=%s "+
		"outages=%d probing=%t open_in=%v refused=%t shutdown_seen=%t stats=%+v",
		r.active.Load(), e.epoch, e.events, len(e.keys), busy, len(e.txns), e.calls, len(e.marks), e.confirmable,
		e.outages, e.probing, time.Until(e.openUntil).Round(time.Millisecond), e.refused, r.shutdownSeen.Load(), r.stats.snapshot())
}
