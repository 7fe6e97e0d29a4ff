package relay

import (
	"sync/atomic"
	"time"
)

// quietSpells remembers what the writers' announcements said of the
// commits they will not announce (stores.QuietListener): a writer that
// paces its NOTIFYs says, with the one after which it starts skipping,
// how long it may now commit unannounced.
type quietSpells struct {
	heard atomic.Bool  // an announcement spoke the signal: the writers use it
	until atomic.Int64 // Unix nanoseconds (Relay.now) until which commits may go unannounced
}

// hear records an announcement heard at now that says quiet (negative: it
// says nothing). A spell lasts quiet plus streamLinger from now: the
// writer's commits after the announcement, and the look that finds the
// last of them.
func (q *quietSpells) hear(now time.Time, quiet time.Duration) {
	if quiet < 0 {
		return
	}
	q.heard.Store(true)
	if quiet == 0 {
		return
	}
	end := now.Add(quiet + streamLinger).UnixNano()
	for {
		cur := q.until.Load()
		if cur >= end || q.until.CompareAndSwap(cur, end) {
			return
		}
	}
}

// streaming reports whether a worker whose claim, begun at began, found one
// event or none should look again after streamLinger rather than wait to
// be woken: while events come faster than NOTIFYs are paced — the
// worker's last claim that found events, begun at found, began less than
// streamGap before — and, once the writers speak the signal, only during
// a quiet spell one of them announced: outside one, every commit wakes a
// worker, and looking finds nothing.
func (q *quietSpells) streaming(began, found time.Time) bool {
	if began.Sub(found) >= streamGap {
		return false
	}
	return !q.heard.Load() || began.UnixNano() < q.until.Load()
}
