package relay

import (
	"github.com/outboxgo/outbox"

	"context"
	"sync"
	"time"
)

// breaker stops every worker while the broker is down or refuses the
// relay's configuration. One failed batch opens it for the next backoff
// delay; when the delay is over one worker probes with a batch while the
// others keep waiting; the probe's success closes it, its failure reopens it
// for a longer delay, and a probe that tested nothing (it found no events,
// the store failed, the relay is stopping) hands the turn on without
// changing the delay. Events are never charged for the outage: the relay
// leaves them untouched.
type breaker struct {
	backoff outbox.Backoff

	mu       sync.Mutex
	failures int           // consecutive failed batches; 0 = closed
	until    time.Time     // open until then (wall clock: this is waiting, not a timestamp)
	probing  bool          // a worker is probing
	changed  chan struct{} // closed on every state change
	refused  bool          // the open breaker's last failure was a refusal
	since    time.Time     // when it opened; zero while closed
}

func newBreaker(b outbox.Backoff) *breaker {
	return &breaker{backoff: b, changed: make(chan struct{})}
}

func (b *breaker) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// wait blocks until the caller may claim: the breaker is closed, or it is
// the caller's turn to probe (probe is then true, and the caller must end
// its turn with success, failure or abandon). ok is false when stop closes
// or ctx ends first.
func (b *breaker) wait(ctx context.Context, stop <-chan struct{}) (probe, ok bool) {
	for {
		b.mu.Lock()
		if b.failures == 0 {
			b.mu.Unlock()
			return false, true
		}
		d := time.Until(b.until)
		if d <= 0 && !b.probing {
			b.probing = true
			b.mu.Unlock()
			return true, true
		}
		ch := b.changed
		b.mu.Unlock()
		if d <= 0 {
			d = time.Hour // a probe is running: wait for its result
		}
		t := time.NewTimer(d)
		select {
		case <-stop:
			t.Stop()
			return false, false
		case <-ctx.Done():
			t.Stop()
			return false, false
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// success closes the breaker; it reports whether it was open.
func (b *breaker) success() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.failures > 0
	b.probing = false
	if was {
		b.failures, b.refused, b.since = 0, false, time.Time{}
		b.notify()
	}
	return was
}

// failure opens the breaker and returns how long for; refused says the
// broker refused the relay's configuration (else it was unavailable).
func (b *breaker) failure(refused bool) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures == 0 {
		b.since = time.Now()
	}
	b.refused = refused
	b.failures++
	b.probing = false
	d := b.backoff.Delay(b.failures)
	b.until = time.Now().Add(d)
	b.notify()
	return d
}

// state reports whether the breaker is open, whether its last failure was
// a refusal, and since when it is open.
func (b *breaker) state() (open, refused bool, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures > 0, b.refused, b.since
}

// abandon ends a probe that tested nothing: the next waiter probes at once.
func (b *breaker) abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probing {
		b.probing = false
		b.notify()
	}
}
