package outbox

import "time"

// Clock tells the time. Every timestamp the outbox writes (created-at,
// next-attempt, published-at) comes from one, so tests can drive time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real time. It is the default Clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
