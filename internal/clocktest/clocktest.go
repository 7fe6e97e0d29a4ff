// Package clocktest has a clock that tests move by hand.
package clocktest

import (
	"sync"
	"time"
)

// Clock is an outbox.Clock that stands still until Advance or Set.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock set to t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now implements outbox.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
