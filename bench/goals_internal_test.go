package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// goalsReport is a run's results as the workloads add them: drains of our
// relay over 1, 10 and 100 keys and the other drains around them, latency
// cells of ours and of the reference, and write-path cells.
func goalsReport() *Report {
	drain := func(cs string, keys int, unordered bool, m map[string]float64) Result {
		return Result{Workload: "drain", Case: cs, Params: map[string]any{"keys": keys, "relays": 1, "unordered": unordered}, Metrics: m}
	}
	return &Report{Results: []Result{
		drain("outbox relay, ordered, 1 keys", 1, false, map[string]float64{"x_unordered": 0.1, "x_js_sync": 0.85, "x_plain": 0.1}),
		drain("outbox relay, unordered, 1 keys", 1, true, map[string]float64{"x_plain": 1.3}),
		drain("outbox relay, ordered, 10 keys", 10, false, map[string]float64{"x_unordered": 0.79, "x_js_sync": 2, "x_plain": 0.9}),
		drain("outbox relay, unordered, 10 keys", 10, true, map[string]float64{"x_plain": 1.1}),
		drain("outbox relay, ordered, 100 keys", 100, false, map[string]float64{"x_unordered": 0.9}),
		drain("outbox relay, unordered, 100 keys", 100, true, map[string]float64{"x_plain": 1.05}),
		// Not ours alone: the scale workload, a limit, the baseline.
		{Workload: "scale", Case: "outbox relay, ordered, 4 relays", Params: map[string]any{"keys": 1000, "relays": 4, "unordered": false}, Metrics: map[string]float64{"x_unordered": 0.1}},
		drain("limit: PostgreSQL claim+delete, ordered, 1000 keys", 1000, false, map[string]float64{"x_unordered": 0.2}),
		{Workload: "drain", Case: "baseline: plain batched relay", Metrics: map[string]float64{"x_plain": 1}},
		{Workload: "latency", Case: "100 ev/s, hand-written LISTEN/NOTIFY relay (reference)", Params: map[string]any{"reference": true, "listen": true}, Metrics: map[string]float64{"p99_ms": 3}},
		{Workload: "latency", Case: "100 ev/s, LISTEN/NOTIFY", Params: map[string]any{"reference": false, "listen": true}, Metrics: map[string]float64{"x_hand_commit_ack_p99": 1.25, "x_hand_p99": 1.1, "x_hand_pg": 0.9}},
		{Workload: "latency", Case: " 1000 ev/s, LISTEN/NOTIFY", Params: map[string]any{"reference": false, "listen": true}, Metrics: map[string]float64{"x_hand_commit_ack_p99": 1.15, "x_hand_p99": 1.5, "x_hand_pg": 0.8}},
		{Workload: "latency", Case: "100 ev/s, polling 1s (default)", Params: map[string]any{"reference": false, "listen": false}, Metrics: map[string]float64{"x_hand_commit_ack_p99": 300, "x_hand_p99": 270}},
		{Workload: "write", Case: " 1 writers, UPDATE + 1 keyed event", Params: map[string]any{"writers": 1, "events_per_tx": 1, "keyed": true}, Metrics: map[string]float64{"x_hand": 0.5}},
		{Workload: "write", Case: "16 writers, UPDATE + 1 keyed event", Params: map[string]any{"writers": 16, "events_per_tx": 1, "keyed": true}, Metrics: map[string]float64{"x_hand": 0.83}},
		{Workload: "write", Case: "16 writers, UPDATE + 1 unkeyed event", Params: map[string]any{"writers": 16, "events_per_tx": 1, "keyed": false}, Metrics: map[string]float64{"x_hand": 0.96}},
		{Workload: "write", Case: "16 writers, UPDATE + 10 keyed events", Params: map[string]any{"writers": 16, "events_per_tx": 10, "keyed": true}, Metrics: map[string]float64{"x_hand": 0.5}},
	}}
}

var wantGoals = []Goal{
	{Goal: "ordered ÷ unordered, 10 to 100,000 keys", Value: 0.79, Cell: "outbox relay, ordered, 10 keys", Target: "≥ 0.80", Met: false},
	{Goal: "one key, ordered ÷ JetStream sync publish", Value: 0.85, Cell: "outbox relay, ordered, 1 keys", Target: "≥ 0.80", Met: true},
	{Goal: "unordered ÷ plain batched relay", Value: 1.05, Cell: "outbox relay, unordered, 100 keys", Target: "≥ 1.00", Met: true},
	{Goal: "latency p99, Commit() returned → broker ack, ÷ hand-written LISTEN/NOTIFY relay", Value: 1.25, Cell: "100 ev/s, LISTEN/NOTIFY", Target: "≤ 1.20", Met: false},
	{Goal: "latency p99, open loop (scheduled send → consumer) ÷ hand-written relay", Value: 1.5, Cell: "1000 ev/s, LISTEN/NOTIFY", Target: "≤ 1.20", Met: false},
	{Goal: "latency, PostgreSQL CPU per event ÷ hand-written relay", Value: 0.9, Cell: "100 ev/s, LISTEN/NOTIFY", Target: "≤ 1.00", Met: true},
	{Goal: "write path, 16 writers, one keyed event ÷ hand-written INSERT", Value: 0.83, Cell: "16 writers, UPDATE + 1 keyed event", Target: "≥ 0.95", Met: false},
	{Goal: "write path, 16 writers, one unkeyed event ÷ hand-written INSERT", Value: 0.96, Cell: "16 writers, UPDATE + 1 unkeyed event", Target: "≥ 0.95", Met: true},
}

// Each goal takes the worst of the cells it covers, and only those: not
// the scale workload's, a limit's, the polling latency cells or the
// write path's other cells.
func TestGoals(t *testing.T) {
	check := func(t *testing.T, got []Goal) {
		t.Helper()
		if len(got) != len(wantGoals) {
			t.Fatalf("%d goals, want %d: %+v", len(got), len(wantGoals), got)
		}
		for i, g := range got {
			if !reflect.DeepEqual(g, wantGoals[i]) {
				t.Errorf("goal %d:\n got %+v\nwant %+v", i, g, wantGoals[i])
			}
		}
	}
	rep := goalsReport()
	check(t, goals(rep))

	// The same from results.json, where numbers come back as float64.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	check(t, goals(&back))

	// A run that measured none of it has no goals, and no table.
	if g := goals(&Report{Results: rep.Results[9:10]}); len(g) != 0 {
		t.Errorf("goals of a run without our cells: %+v", g)
	}
	rep.Goals = goals(rep)
	var table bytes.Buffer
	writeGoals(&table, rep)
	for _, want := range []string{"| ordered ÷ unordered, 10 to 100,000 keys | 0.79 | outbox relay, ordered, 10 keys | ≥ 0.80 | no |",
		"| write path, 16 writers, one unkeyed event ÷ hand-written INSERT | 0.96 | 16 writers, UPDATE + 1 unkeyed event | ≥ 0.95 | yes |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the goals table has no row %q:\n%s", want, table.String())
		}
	}
}

// Over several rounds each goal is judged on the median of the rounds'
// worst values, whichever cell gave each; the table lists every round's.
func TestMedianGoals(t *testing.T) {
	round := func(orderedWorst, keyed float64, cell string) []Goal {
		rep := goalsReport()
		rep.Results[2].Metrics["x_unordered"] = orderedWorst // the 10-key cell
		rep.Results[2].Case = cell
		rep.Results[14].Metrics["x_hand"] = keyed // 16 writers, keyed
		return goals(rep)
	}
	// One round: its goals as they are.
	one := round(0.79, 0.83, "outbox relay, ordered, 10 keys")
	if one[0].Value != 0.79 || one[6].Value != 0.83 {
		t.Fatalf("the rounds' cells are not where this test puts them: %+v", one)
	}
	if got := medianGoals([][]Goal{one}); !reflect.DeepEqual(got, one) {
		t.Errorf("one round: %+v, want %+v", got, one)
	}
	// Three rounds: the 100-key cell (0.9) is the worst of the round whose
	// 10-key cell did well (1.0), and a slow spell sank one round's keyed
	// cell.
	got := medianGoals([][]Goal{
		round(0.79, 0.96, "outbox relay, ordered, 10 keys (round 1)"),
		round(1.0, 0.97, "outbox relay, ordered, 10 keys (round 2)"),
		round(0.85, 0.60, "outbox relay, ordered, 10 keys (round 3)"),
	})
	if len(got) != len(wantGoals) {
		t.Fatalf("%d goals, want %d: %+v", len(got), len(wantGoals), got)
	}
	want := Goal{Goal: "ordered ÷ unordered, 10 to 100,000 keys", Value: 0.85, Cell: "outbox relay, ordered, 10 keys (round 3)",
		Target: "≥ 0.80", Met: true, Rounds: []float64{0.79, 0.9, 0.85}}
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("ordered ÷ unordered:\n got %+v\nwant %+v", got[0], want)
	}
	keyed := Goal{Goal: "write path, 16 writers, one keyed event ÷ hand-written INSERT", Value: 0.96,
		Cell: "16 writers, UPDATE + 1 keyed event", Target: "≥ 0.95", Met: true, Rounds: []float64{0.96, 0.97, 0.60}}
	if !reflect.DeepEqual(got[6], keyed) {
		t.Errorf("keyed write path:\n got %+v\nwant %+v", got[6], keyed)
	}
	// Two rounds: the mean of the middle two, judged as such, and the
	// lower one's cell.
	two := medianGoals([][]Goal{round(0.7, 0.9, "outbox relay, ordered, 10 keys (a)"), round(0.86, 0.96, "outbox relay, ordered, 10 keys (b)")})
	if v := two[0].Value; v < 0.7799 || v > 0.7801 || two[0].Met || two[0].Cell != "outbox relay, ordered, 10 keys (a)" {
		t.Errorf("two rounds: %+v, want 0.78, not met, the first round's cell", two[0])
	}
	var table bytes.Buffer
	writeGoals(&table, &Report{Goals: got})
	for _, want := range []string{"### Issue 15's goals (the median of 3 rounds' worst cells)",
		"| ordered ÷ unordered, 10 to 100,000 keys | 0.85 | 0.79 / 0.90 / 0.85 | outbox relay, ordered, 10 keys (round 3) | ≥ 0.80 | yes |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the goals table has no row %q:\n%s", want, table.String())
		}
	}
}
