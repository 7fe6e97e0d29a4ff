package relay

import (
	"time"

	"github.com/outboxgo/outbox/internal/backoff"
)

// delay returns the n-th delay (n ≥ 1): Min·2^(n-1), capped at Max, spread by
// ±Jitter.
func (b Backoff) delay(n int) time.Duration {
	return backoff.Delay(b.Min, b.Max, b.Jitter, n)
}
