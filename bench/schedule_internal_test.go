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

// TestTurns: lanes sharing a latency cell take turns slice by slice, each
// getting an equal share of evenly scheduled events, in runs of a slice's
// worth; one lane gets every event.
func TestTurns(t *testing.T) {
	sched := schedule(4000, 1000, false) // 4 s
	got := make([]int, 2)
	runs, prev := 0, -1
	for _, at := range sched {
		l := turn(at, 250*time.Millisecond, 2)
		got[l]++
		if l != prev {
			runs, prev = runs+1, l
		}
	}
	if got[0] != 2000 || got[1] != 2000 || runs != 16 {
		t.Errorf("lanes got %v events in %d runs, want 2000 each in 16 runs of 250", got, runs)
	}
	for _, at := range sched {
		if l := turn(at, 250*time.Millisecond, 1); l != 0 {
			t.Fatalf("one lane: turn %d at %v", l, at)
		}
	}
}
