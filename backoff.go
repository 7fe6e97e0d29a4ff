package outbox

import (
	"fmt"
	"time"

	"github.com/outboxgo/outbox/internal/backoff"
)

// Backoff is an exponential backoff with jitter, the one every part of the
// project uses: the relay's retries and outage probes, and the
// subscribers' redeliveries.
type Backoff struct {
	// Min is the first delay; each later one doubles, up to Max.
	Min, Max time.Duration
	// Jitter spreads each delay uniformly over ±Jitter of it (0 to 1).
	Jitter float64
}

// Delay returns the n-th delay (n ≥ 1): Min·2^(n-1), capped at Max, spread
// by ±Jitter.
func (b Backoff) Delay(n int) time.Duration {
	return backoff.Delay(b.Min, b.Max, b.Jitter, n)
}

// Validate reports a Backoff no delay can come from: a negative bound, Max
// below Min, or a Jitter outside [0, 1]. The zero Backoff is valid: it
// stands for the default of the Config that holds it.
func (b Backoff) Validate() error {
	switch {
	case b.Min < 0 || b.Max < 0:
		return fmt.Errorf("backoff %v to %v: negative", b.Min, b.Max)
	case b.Max < b.Min:
		return fmt.Errorf("backoff %v to %v: max below min", b.Min, b.Max)
	case b.Jitter < 0 || b.Jitter > 1:
		return fmt.Errorf("backoff jitter %v: want 0 to 1", b.Jitter)
	}
	return nil
}
