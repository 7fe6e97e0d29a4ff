package bench

import (
	"slices"
	"testing"
	"time"
)

// Each acknowledged event's latency runs from its own commit's return;
// an event acked before its writer saw the commit return counts as zero
// and as early; one not committed by a writer of this lane is left out.
func TestBetween(t *testing.T) {
	t0 := time.Unix(1000, 0)
	committed := map[int64]time.Time{
		1: t0.Add(1 * time.Millisecond),
		2: t0.Add(2 * time.Millisecond),
		3: t0.Add(3 * time.Millisecond),
	}
	acked := map[int64]time.Time{
		1: t0.Add(4 * time.Millisecond),    // 3 ms after its commit
		2: t0.Add(2500 * time.Microsecond), // 0.5 ms
		3: t0.Add(2 * time.Millisecond),    // before its commit returned
		9: t0.Add(10 * time.Millisecond),   // no commit of this lane
	}
	ds, early := between(committed, acked)
	slices.Sort(ds)
	want := []time.Duration{0, 500 * time.Microsecond, 3 * time.Millisecond}
	if !slices.Equal(ds, want) || early != 1 {
		t.Errorf("between = %v, %d early; want %v, 1 early", ds, early, want)
	}
}
