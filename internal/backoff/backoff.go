// Package backoff computes exponential backoff delays with jitter, the one
// schedule the relay and every subscriber use.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Delay returns the n-th delay (n ≥ 1): minimum·2^(n-1), capped at maximum,
// then spread uniformly over ±jitter of itself (jitter from 0 to 1).
func Delay(minimum, maximum time.Duration, jitter float64, n int) time.Duration {
	d := minimum
	for i := 1; i < n && d < maximum; i++ {
		d *= 2
	}
	d = min(d, maximum)
	if jitter > 0 && d > 0 {
		d = time.Duration(float64(d) * (1 + jitter*(2*rand.Float64()-1)))
	}
	return d
}
