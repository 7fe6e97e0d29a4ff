package bench

import (
	"testing"
	"time"
)

// TestWriteTally checks what a write-path cell reports from its rounds:
// the median rate, the median of the rounds' own ratios to the reference
// (not the ratio of the medians), and the CPU per transaction over every
// round, weighted by each round's transactions.
func TestWriteTally(t *testing.T) {
	commits := func(n int) []time.Duration {
		lat := make([]time.Duration, n)
		for i := range lat {
			lat[i] = time.Duration(i+1) * time.Millisecond
		}
		return lat
	}
	var w writeTally
	for _, r := range []struct {
		n   int     // commits in one second
		cpu float64 // PostgreSQL µs per commit (the cell reports it in all)
		x   float64 // the round's ratio to the reference
	}{{100, 10, 0.9}, {300, 20, 1.2}, {200, 40, 0.5}} {
		w.add(commits(r.n), time.Second, map[string]float64{"pg_cpu_us": r.cpu * float64(r.n), "relay_cpu_us": float64(r.n)})
		w.xHand = append(w.xHand, r.x)
	}
	res := w.result(writeCase{name: "UPDATE + 1 keyed event", events: 1, keyed: true}, 16)
	if res.Case != "16 writers, UPDATE + 1 keyed event" {
		t.Errorf("case %q", res.Case)
	}
	for metric, want := range map[string]float64{
		"commits_per_s": 200,
		"x_hand":        0.9,
		"pg_cpu_us":     (100*10 + 300*20 + 200*40) / 600.0,
		"writer_cpu_us": 1,
		"p50_ms":        100, // of the 600 commits' latencies: 1–100, 1–300, 1–200 ms
	} {
		if got := res.Metrics[metric]; got != want {
			t.Errorf("%s = %v, want %v", metric, got, want)
		}
	}
	if got := res.Params["rounds"]; got != 3 {
		t.Errorf("rounds = %v, want 3", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
