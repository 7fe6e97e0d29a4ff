package relay

import (
	"math/rand/v2"
	"time"
)

// delay returns the n-th delay (n ≥ 1): Min·2^(n-1), capped at Max, spread by
// ±Jitter.
func (b Backoff) delay(n int) time.Duration {
	d := b.Min
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		f := 1 + b.Jitter*(2*rand.Float64()-1)
		d = time.Duration(float64(d) * f)
	}
	return d
}
