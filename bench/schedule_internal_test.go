package bench

import (
	"testing"
	"time"
)

// TestSchedule: even arrivals are 1/rate apart; Poisson ones have that
// mean gap, vary (about as many gaps under 0.8/rate as e^-0.8 predicts)
// and never go back in time.
func TestSchedule(t *testing.T) {
	const n, rate = 20000, 100
	even := schedule(n, rate, false)
	for i, at := range even {
		if want := time.Duration(i) * 10 * time.Millisecond; at != want {
			t.Fatalf("even arrival %d at %v, want %v", i, at, want)
		}
	}
	poisson := schedule(n, rate, true)
	short := 0
	for i := 1; i < n; i++ {
		gap := poisson[i] - poisson[i-1]
		if gap < 0 {
			t.Fatalf("Poisson arrival %d before the one before", i)
		}
		if gap < 8*time.Millisecond {
			short++
		}
	}
	if mean := poisson[n-1] / (n - 1); mean < 9*time.Millisecond || mean > 11*time.Millisecond {
		t.Errorf("Poisson mean gap %v, want about 10ms", mean)
	}
	// P(gap < 0.8/rate) = 1 - e^-0.8 ≈ 0.55.
	if frac := float64(short) / (n - 1); frac < 0.52 || frac > 0.58 {
		t.Errorf("%.3f of the Poisson gaps are under 8ms, want about 0.55", frac)
	}
}
