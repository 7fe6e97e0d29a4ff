package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Goal is one of issue 15's targets read off a run: the worst value among
// the cells it covers, the cell that gave it, and whether the run met it.
// A goal whose cells the run did not measure is left out. Over several
// rounds (Options.Rounds), Value is the median of the rounds' worst
// values (the mean of the middle two for an even count), Cell the median
// round's worst cell (the lower of the middle two's), Met judged on Value,
// and Rounds each round's worst value, in round order.
type Goal struct {
	Goal   string    `json:"goal"`
	Value  float64   `json:"value"`
	Cell   string    `json:"cell"`
	Target string    `json:"target"`
	Met    bool      `json:"met"`
	Rounds []float64 `json:"rounds,omitempty"`
}

// goalSpec says which cells a goal covers and how its value is judged.
type goalSpec struct {
	goal    string
	metric  string
	cell    func(Result) bool
	atLeast bool // the target is a floor (else a ceiling)
	target  float64
}

var goalSpecs = []goalSpec{
	{goal: "ordered ÷ unordered, 10 to 100,000 keys", metric: "x_unordered", atLeast: true, target: 0.8,
		cell: func(r Result) bool {
			return ourDrain(r, false) && num(r.Params["keys"]) >= 10 && num(r.Params["keys"]) <= 100000
		}},
	{goal: "one key, ordered ÷ JetStream sync publish", metric: "x_js_sync", atLeast: true, target: 0.8,
		cell: func(r Result) bool { return ourDrain(r, false) && num(r.Params["keys"]) == 1 }},
	{goal: "unordered ÷ plain batched relay", metric: "x_plain", atLeast: true, target: 1.0,
		cell: func(r Result) bool { return ourDrain(r, true) }},
	{goal: "latency p99, Commit() returned → broker ack, ÷ hand-written LISTEN/NOTIFY relay", metric: "x_hand_commit_ack_p99", atLeast: false, target: 1.2,
		cell: ourListenLatency},
	{goal: "latency p99, open loop (scheduled send → consumer) ÷ hand-written relay", metric: "x_hand_p99", atLeast: false, target: 1.2,
		cell: ourListenLatency},
	{goal: "latency, PostgreSQL CPU per event ÷ hand-written relay", metric: "x_hand_pg", atLeast: false, target: 1.0,
		cell: ourListenLatency},
	{goal: "write path, 16 writers, one keyed event ÷ hand-written INSERT", metric: "x_hand", atLeast: true, target: 0.95,
		cell: func(r Result) bool { return writeCell(r, true) }},
	{goal: "write path, 16 writers, one unkeyed event ÷ hand-written INSERT", metric: "x_hand", atLeast: true, target: 0.95,
		cell: func(r Result) bool { return writeCell(r, false) }},
}

// ourDrain reports whether r is a drain of our relay alone (not a limit, a
// baseline or the scale workload), ordered or not as unordered says.
func ourDrain(r Result, unordered bool) bool {
	return r.Workload == "drain" && strings.HasPrefix(r.Case, "outbox relay, ") &&
		r.Params["unordered"] == unordered && num(r.Params["relays"]) == 1
}

// ourListenLatency reports whether r is a latency cell of our relay with
// LISTEN/NOTIFY, the configuration the latency goal is set for.
func ourListenLatency(r Result) bool {
	return r.Workload == "latency" && r.Params["reference"] == false && r.Params["listen"] == true
}

// writeCell reports whether r is the write path's cell of 16 writers
// enqueueing one event, keyed or not.
func writeCell(r Result, keyed bool) bool {
	return r.Workload == "write" && num(r.Params["writers"]) == 16 && num(r.Params["events_per_tx"]) == 1 &&
		r.Params["keyed"] == keyed
}

// num reads a number from a result's parameters, as set by a run (an int)
// or read back from results.json (a float64); -1 when it is neither.
func num(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	return -1
}

// goals judges rep's results against goalSpecs.
func goals(rep *Report) []Goal {
	var out []Goal
	for _, g := range goalSpecs {
		found := false
		var worst Goal
		for _, r := range rep.Results {
			v, ok := r.Metrics[g.metric]
			if !ok || !g.cell(r) {
				continue
			}
			if !found || g.atLeast && v < worst.Value || !g.atLeast && v > worst.Value {
				worst = Goal{Value: v, Cell: strings.Join(strings.Fields(r.Case), " ")}
				found = true
			}
		}
		if !found {
			continue
		}
		worst.Goal = g.goal
		g.judge(&worst)
		out = append(out, worst)
	}
	return out
}

// judge sets v's target and whether its value meets it.
func (g goalSpec) judge(v *Goal) {
	if g.atLeast {
		v.Target, v.Met = fmt.Sprintf("≥ %.2f", g.target), v.Value >= g.target
	} else {
		v.Target, v.Met = fmt.Sprintf("≤ %.2f", g.target), v.Value <= g.target
	}
}

// medianGoals judges each goal on the median of its worst values over
// rounds, each round's goals as goals returns them. With one round it
// returns that round's goals as they are. A goal some round did not
// measure is judged on the rounds that did.
func medianGoals(rounds [][]Goal) []Goal {
	if len(rounds) == 1 {
		return rounds[0]
	}
	var out []Goal
	for _, g := range goalSpecs {
		var seen []Goal
		for _, round := range rounds {
			for _, v := range round {
				if v.Goal == g.goal {
					seen = append(seen, v)
				}
			}
		}
		if len(seen) == 0 {
			continue
		}
		m := Goal{Goal: g.goal}
		for _, v := range seen {
			m.Rounds = append(m.Rounds, v.Value)
		}
		sorted := slices.Clone(seen)
		slices.SortStableFunc(sorted, func(a, b Goal) int { return cmp.Compare(a.Value, b.Value) })
		mid := (len(sorted) - 1) / 2
		m.Value, m.Cell = sorted[mid].Value, sorted[mid].Cell
		if len(sorted)%2 == 0 {
			m.Value = (sorted[mid].Value + sorted[mid+1].Value) / 2
		}
		g.judge(&m)
		out = append(out, m)
	}
	return out
}

// writeGoals prints rep.Goals as a Markdown table.
func writeGoals(w io.Writer, rep *Report) {
	if len(rep.Goals) == 0 {
		return
	}
	if len(rep.Goals[0].Rounds) == 0 {
		fmt.Fprint(w, "### Issue 15's goals (the worst cell of this run)\n\n| goal | value | cell | target | met |\n|---|--:|---|--:|---|\n")
	} else {
		fmt.Fprintf(w, "### Issue 15's goals (the median of %d rounds' worst cells)\n\n"+
			"| goal | median | each round | median round's cell | target | met |\n|---|--:|--:|---|--:|---|\n", len(rep.Goals[0].Rounds))
	}
	for _, g := range rep.Goals {
		met := "no"
		if g.Met {
			met = "yes"
		}
		if len(g.Rounds) == 0 {
			fmt.Fprintf(w, "| %s | %.2f | %s | %s | %s |\n", g.Goal, g.Value, g.Cell, g.Target, met)
			continue
		}
		each := make([]string, len(g.Rounds))
		for i, v := range g.Rounds {
			each[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "| %s | %.2f | %s | %s | %s | %s |\n", g.Goal, g.Value, strings.Join(each, " / "), g.Cell, g.Target, met)
	}
	fmt.Fprintln(w)
}
