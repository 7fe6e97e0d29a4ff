package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/template"
)

// addRatios gives every drain figure as a ratio to the limits (c) and to
// the baselines (a) and (b) measured in the same run. The DB limit is the
// higher of its two cases.
func addRatios(rep *Report) {
	ref := map[string]string{
		"x_js_limit":  "limit: JetStream async publish",
		"x_js_sync":   "limit: JetStream sync publish",
		"x_db_limit":  "limit: PostgreSQL claim+delete",
		"x_textbook":  "baseline: textbook loop",
		"x_watermill": "baseline: Watermill forwarder",
		"x_plain":     "baseline: plain batched relay",
	}
	base := map[string]float64{}
	for _, res := range rep.Results {
		if res.Workload == "drain" {
			for k, c := range ref {
				if strings.HasPrefix(res.Case, c) {
					base[k] = max(base[k], res.Metrics["events_per_s"])
				}
			}
			if strings.HasPrefix(res.Case, "limit: MySQL claim+delete") {
				base["x_db_limit"] = max(base["x_db_limit"], res.Metrics["events_per_s"])
			}
		}
	}
	latencyRatios(rep)
	for i := range rep.Results {
		res := &rep.Results[i]
		if res.Workload != "drain" && res.Workload != "scale" {
			continue
		}
		for k, v := range base {
			if v > 0 {
				res.Metrics[k] = res.Metrics["events_per_s"] / v
			}
		}
		if u := unorderedTwin(rep, res); u > 0 {
			res.Metrics["x_unordered"] = res.Metrics["events_per_s"] / u
		}
	}
}

// latencyRatios sets each latency cell of our relay against the
// hand-written LISTEN/NOTIFY relay at the same rate: x_hand_commit_ack_p99
// (Commit() returned → broker ack, issue 15's measure), x_hand_p99 (open
// loop, scheduled send → consumer) and x_hand_pg (PostgreSQL CPU per
// event).
func latencyRatios(rep *Report) {
	ref := map[any]map[string]float64{}
	for _, res := range rep.Results {
		if res.Workload == "latency" && res.Params["reference"] == true {
			ref[res.Params["rate"]] = res.Metrics
		}
	}
	for i := range rep.Results {
		res := &rep.Results[i]
		h, ok := ref[res.Params["rate"]]
		if res.Workload != "latency" || res.Params["reference"] == true || !ok {
			continue
		}
		if h["p99_ms"] > 0 {
			res.Metrics["x_hand_p99"] = res.Metrics["p99_ms"] / h["p99_ms"]
		}
		if h["commit_ack_p99_ms"] > 0 {
			res.Metrics["x_hand_commit_ack_p99"] = res.Metrics["commit_ack_p99_ms"] / h["commit_ack_p99_ms"]
		}
		if pg, ok := res.Metrics["pg_cpu_us"]; ok && h["pg_cpu_us"] > 0 {
			res.Metrics["x_hand_pg"] = pg / h["pg_cpu_us"]
		}
	}
}

// unorderedTwin is the rate of the unordered drain that pairs with res, an
// ordered drain of our relay: same workload, keys and relays. Zero when
// res is not ordered or has no twin.
func unorderedTwin(rep *Report, res *Result) float64 {
	if res.Params == nil || res.Params["unordered"] != false {
		return 0
	}
	for _, u := range rep.Results {
		if u.Workload == res.Workload && u.Params != nil && u.Params["unordered"] == true &&
			u.Params["keys"] == res.Params["keys"] && u.Params["relays"] == res.Params["relays"] &&
			u.Params["ack_delay_ms"] == res.Params["ack_delay_ms"] {
			return u.Metrics["events_per_s"]
		}
	}
	return 0
}

type column struct{ title, metric, format string }

var columns = map[string][]column{
	"drain": {{"events/s", "events_per_s", "%.0f"}, {"× unordered", "x_unordered", "%.2f"}, {"× JetStream sync", "x_js_sync", "%.2f"},
		{"× JetStream limit", "x_js_limit", "%.2f"}, {"× plain batched", "x_plain", "%.2f"}, {"× DB limit", "x_db_limit", "%.2f"},
		{"× textbook", "x_textbook", "%.1f"}, {"× Watermill", "x_watermill", "%.1f"},
		{"relay µs/ev", "relay_cpu_us", "%.1f"}, {"NATS µs/ev", "nats_cpu_us", "%.1f"}, {"PG µs/ev", "pg_cpu_us", "%.1f"},
		{"peak RSS MiB", "peak_rss_mib", "%.0f"}, {"seconds", "seconds", "%.1f"}},
	"write": {{"commits/s", "commits_per_s", "%.0f"}, {"× hand-written", "x_hand", "%.2f"}, {"p50 ms", "p50_ms", "%.2f"}, {"p99 ms", "p99_ms", "%.2f"},
		{"writer µs/tx", "writer_cpu_us", "%.1f"}, {"PG µs/tx", "pg_cpu_us", "%.1f"}},
	"latency": {{"committed ev/s", "committed_per_s", "%.0f"}, {"received", "received", "%.0f"}, {"p50 ms", "p50_ms", "%.1f"}, {"p99 ms", "p99_ms", "%.1f"}, {"p999 ms", "p999_ms", "%.1f"}, {"max ms", "max_ms", "%.1f"},
		{"commit p50 ms", "commit_p50_ms", "%.1f"}, {"commit p99 ms", "commit_p99_ms", "%.1f"}, {"send p50 ms", "send_p50_ms", "%.1f"}, {"ack p50 ms", "ack_p50_ms", "%.1f"}, {"commit → ack p50 ms", "commit_ack_p50_ms", "%.2f"}, {"commit → ack p99 ms", "commit_ack_p99_ms", "%.2f"}, {"c → send p99 ms", "commit_send_p99_ms", "%.2f"}, {"send → ack p99 ms", "send_ack_p99_ms", "%.2f"}, {"× hand c→a p99", "x_hand_commit_ack_p99", "%.2f"}, {"× hand p99", "x_hand_p99", "%.2f"}, {"PG µs/ev", "pg_cpu_us", "%.0f"}, {"× hand PG", "x_hand_pg", "%.2f"},
		{"claims/ev", "claims_per_ev", "%.2f"}},
	"scale": {{"events/s", "events_per_s", "%.0f"}, {"× 1 relay", "x_one_relay", "%.2f"}, {"ack bound ev/s", "ack_bound_per_s", "%.0f"},
		{"× ack bound", "x_ack_bound", "%.2f"}, {"peak RSS MiB", "peak_rss_mib", "%.0f"}, {"× JetStream limit", "x_js_limit", "%.2f"},
		{"× textbook", "x_textbook", "%.1f"}, {"× Watermill", "x_watermill", "%.1f"}},
	"history": {{"median ms", "median_ms", "%.2f"}, {"p99 ms", "p99_ms", "%.2f"}},
}

var titles = map[string]string{
	"drain":   "Drain (backlog → JetStream, acked)",
	"write":   "Write-path cost",
	"latency": "End-to-end latency, open loop (scheduled send → consumer receive)",
	"scale":   "Scale-out, broker-bound (acks one after another per Publish call, fixed delay each)",
	"history": "Claim latency with history",
}

// WriteTable prints the results as Markdown tables, one per workload.
func WriteTable(w io.Writer, rep *Report) {
	writeMachine(w, rep.Machine)
	for _, wl := range []string{"drain", "write", "latency", "scale", "history"} {
		var rows []Result
		for _, res := range rep.Results {
			if res.Workload == wl {
				rows = append(rows, res)
			}
		}
		if len(rows) == 0 {
			continue
		}
		cols := dbColumns(columns[wl], rows)
		fmt.Fprintf(w, "### %s\n\n| case |", titles[wl])
		for _, c := range cols {
			fmt.Fprintf(w, " %s |", c.title)
		}
		fmt.Fprint(w, "\n|---|")
		for range cols {
			fmt.Fprint(w, "--:|")
		}
		fmt.Fprintln(w)
		for _, res := range rows {
			fmt.Fprintf(w, "| %s |", strings.Join(strings.Fields(res.Case), " "))
			for _, c := range cols {
				if v, ok := res.Metrics[c.metric]; ok {
					fmt.Fprintf(w, " "+c.format+" |", v)
				} else {
					fmt.Fprint(w, " – |")
				}
			}
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w)
	}
	writeGoals(w, rep)
	if len(rep.Failures) > 0 {
		fmt.Fprintf(w, "Failed: %s\n", strings.Join(rep.Failures, "; "))
	}
}

// writeMachine prints one line on the machine the run measured, with
// what a system call cost it: ratios between relays that make system
// calls at different rates move with it (see cputime.Syscall).
func writeMachine(w io.Writer, m map[string]any) {
	var parts []string
	if v, ok := m["cpu"].(string); ok {
		parts = append(parts, v)
	}
	if v, ok := m["cpus"]; ok {
		parts = append(parts, fmt.Sprintf("%v CPUs", v))
	}
	for _, db := range []string{"postgres", "mysql"} {
		if v, ok := m[db].(string); ok {
			parts = append(parts, db+" "+v)
		}
	}
	if v, ok := m["syscall_ns"]; ok {
		parts = append(parts, fmt.Sprintf("a system call %v ns", v))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "Machine: %s.\n\n", strings.Join(parts, ", "))
	}
}

// dbColumns returns cols with PostgreSQL's CPU column made MySQL's when
// rows measured MySQL (a run on a mysql:// URL).
func dbColumns(cols []column, rows []Result) []column {
	for _, res := range rows {
		if _, ok := res.Metrics["mysql_cpu_us"]; ok {
			out := slices.Clone(cols)
			for i, c := range out {
				if c.metric == "pg_cpu_us" {
					out[i] = column{"MySQL µs/ev", "mysql_cpu_us", c.format}
				}
			}
			return out
		}
	}
	return cols
}

func formatMetrics(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%.4g ", k, m[k])
	}
	return b.String()
}

func writeFiles(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	charts := []struct {
		file, title, workload, metric, unit string
	}{
		{"drain.svg", "Drain to JetStream with acks (events/s, higher is better)", "drain", "events_per_s", "ev/s"},
		{"scale.svg", "Scale-out, broker-bound: fixed delay per ack (events/s)", "scale", "events_per_s", "ev/s"},
		{"write.svg", "Write path (commits/s, higher is better)", "write", "commits_per_s", "tx/s"},
		{"latency.svg", "Commit → consumer latency, p99 (ms, lower is better)", "latency", "p99_ms", "ms"},
		{"history.svg", "Claim 1,000 + abort, median (ms)", "history", "median_ms", "ms"},
	}
	for _, c := range charts {
		var bars []bar
		for _, res := range rep.Results {
			if res.Workload == c.workload {
				bars = append(bars, bar{Label: strings.Join(strings.Fields(res.Case), " "), Value: res.Metrics[c.metric]})
			}
		}
		if len(bars) == 0 {
			continue
		}
		f, err := os.Create(filepath.Join(dir, c.file))
		if err != nil {
			return err
		}
		err = renderChart(f, c.title, c.unit, bars)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type bar struct {
	Label string
	Value float64
	// Filled in by renderChart.
	Y, W    float64
	ValText string
}

var chartTmpl = template.Must(template.New("chart").Parse(`<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">{{.Title}}</text>
{{range .Bars}}<text x="{{$.LabelW}}" y="{{printf "%.0f" .Y}}" dy="15" text-anchor="end" dx="-6">{{.Label}}</text>
<rect x="{{$.LabelW}}" y="{{printf "%.0f" .Y}}" width="{{printf "%.1f" .W}}" height="20" fill="#4878a8"/>
<text x="{{$.LabelW}}" y="{{printf "%.0f" .Y}}" dx="{{printf "%.1f" .W}}" dy="15"> {{.ValText}}</text>
{{end}}</svg>
`))

// renderChart writes a horizontal bar chart.
func renderChart(w io.Writer, title, unit string, bars []bar) error {
	const labelW, plotW, top, step = 330.0, 420.0, 36.0, 26.0
	hi := 0.0
	for _, b := range bars {
		hi = math.Max(hi, b.Value)
	}
	bars = slices.Clone(bars)
	for i := range bars {
		bars[i].Label = html.EscapeString(bars[i].Label)
		bars[i].Y = top + float64(i)*step
		if hi > 0 {
			bars[i].W = bars[i].Value / hi * plotW
		}
		if bars[i].Value >= 100 {
			bars[i].ValText = fmt.Sprintf("%.0f %s", bars[i].Value, unit)
		} else {
			bars[i].ValText = fmt.Sprintf("%.2f %s", bars[i].Value, unit)
		}
	}
	return chartTmpl.Execute(w, map[string]any{
		"Width": labelW + plotW + 110, "Height": top + float64(len(bars))*step + 10,
		"Title": html.EscapeString(title), "LabelW": labelW, "Bars": bars,
	})
}
