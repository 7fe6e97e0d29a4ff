// Package bench is the outbox benchmark suite: drain, write-path cost,
// end-to-end latency, scale-out and history, each on real PostgreSQL and real
// NATS JetStream, side by side with the textbook relay loop, Watermill's SQL
// forwarder and the raw limits of the broker and the database. With a
// mysql:// database URL, the limits, drain and scale workloads run on
// MySQL/MariaDB instead (MySQLWorkloads), with the same tables.
//
// It is a module of its own so that Watermill stays out of the outbox
// module's dependencies. cmd/outbox-bench is the command; TestQuick runs its
// one-iteration mode in CI.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Options configure a run. Zero fields take the defaults of the mode
// (full or Quick); see Defaults.
type Options struct {
	DatabaseURL string
	NatsURL     string
	// FastKeyRuns sets the NATS publisher's FastKeyRuns: the run fails
	// where the server cannot take fast-ingest batches (nats-server 2.14
	// or later). Without it the publisher takes them where it can, as by
	// default: the benchmark's streams allow batch publish.
	FastKeyRuns bool
	// NoKeyRuns sets the NATS publisher's NoKeyRuns (and the streams do
	// not allow batch publish): a key's events go one at a time, as on a
	// server older than 2.14.
	NoKeyRuns bool
	Quick     bool
	// Only, when non-empty, runs only these workloads (see Workloads).
	Only []string
	// Rounds runs the selected workloads this many times, one whole run
	// after another: each round's cells are set against the same round's
	// references, and each goal of issue 15 is judged on the median of the
	// rounds' worst cells (see Goal.Rounds). One run on a shared host is
	// one sample: a slow spell of a few seconds can sink one cell. Default
	// 1.
	Rounds int
	// OutDir receives results.json and the SVG charts; empty: none.
	OutDir string
	Out    io.Writer // progress and the table; default os.Stdout

	DrainN       int           // events per drain of our relay and of the limits
	Keys         []int         // key counts of the drain's ordered/unordered pairs; default 1000 (quick: 1, 1000)
	BaselineN    int           // events per drain of the textbook loop and Watermill
	WriteFor     time.Duration // per write-path cell and round
	WriteRounds  int           // rounds of the write path's cases, taking turns; default 3 (quick: 1)
	LatencyFor   time.Duration // per latency cell
	LatencyRates []int         // events/s
	// LatencyPoisson schedules the latency cells' events as a Poisson
	// process (exponential gaps, the same seed every run) instead of
	// evenly: bursts and lulls as independent users make them.
	LatencyPoisson bool
	// LatencySlice, when positive, puts the hand-written reference and our
	// relay with LISTEN/NOTIFY in one latency cell, taking turns in slices
	// of this length; zero: a cell each, one after the other.
	LatencySlice time.Duration
	// LatencyWarmup is how long each latency cell sends each mode events
	// before it measures (see latencyCell); default 1s (quick: 200ms),
	// negative: none.
	LatencyWarmup time.Duration
	ScaleN        int           // events per scale cell
	ScaleAckDelay time.Duration // broker delay per acked message in scale cells (ackDelayPublisher); default 1ms
	HistoryN      int           // published rows kept for the history workload
	HistoryReps   int           // claims per history cell
}

// Workloads are the names -only accepts, in run order.
var Workloads = []string{"limits", "drain", "textbook", "watermill", "write", "latency", "scale", "history"}

func (o *Options) withDefaults() {
	if o.DatabaseURL == "" {
		o.DatabaseURL = "postgres://postgres@127.0.0.1:5432/test"
	}
	if o.NatsURL == "" {
		o.NatsURL = "nats://127.0.0.1:4222"
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	o.Rounds = max(1, o.Rounds)
	q := func(full, quick int) int {
		if o.Quick {
			return quick
		}
		return full
	}
	d := func(full, quick time.Duration) time.Duration {
		if o.Quick {
			return quick
		}
		return full
	}
	if o.DrainN == 0 {
		o.DrainN = q(1_000_000, 2_000)
	}
	if len(o.Keys) == 0 {
		if o.Quick {
			o.Keys = []int{1, keyCount}
		} else {
			o.Keys = []int{keyCount}
		}
	}
	if o.BaselineN == 0 {
		o.BaselineN = q(100_000, 2_000)
	}
	if o.WriteFor == 0 {
		o.WriteFor = d(5*time.Second, 200*time.Millisecond)
	}
	if o.WriteRounds == 0 {
		o.WriteRounds = q(3, 1)
	}
	if o.LatencyFor == 0 {
		o.LatencyFor = d(10*time.Second, time.Second)
	}
	switch {
	case o.LatencyWarmup == 0:
		o.LatencyWarmup = d(time.Second, 200*time.Millisecond)
	case o.LatencyWarmup < 0:
		o.LatencyWarmup = 0
	}
	if len(o.LatencyRates) == 0 {
		if o.Quick {
			o.LatencyRates = []int{100}
		} else {
			o.LatencyRates = []int{100, 1000, 5000}
		}
	}
	if o.ScaleN == 0 {
		o.ScaleN = q(100_000, 2_000)
	}
	if o.ScaleAckDelay == 0 {
		o.ScaleAckDelay = time.Millisecond
	}
	if o.HistoryN == 0 {
		o.HistoryN = q(10_000_000, 100_000)
	}
	if o.HistoryReps == 0 {
		o.HistoryReps = q(200, 20)
	}
}

func (o *Options) runs(w string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, w) }

// Result is one measured cell.
type Result struct {
	Workload string             `json:"workload"`
	Case     string             `json:"case"`
	Params   map[string]any     `json:"params,omitempty"`
	Metrics  map[string]float64 `json:"metrics"`
	Note     string             `json:"note,omitempty"`
}

// Report is what a run produces.
type Report struct {
	Started  time.Time      `json:"started"`
	Elapsed  float64        `json:"elapsed_seconds"`
	Quick    bool           `json:"quick"`
	Machine  map[string]any `json:"machine"`
	Options  map[string]any `json:"options"`
	Results  []Result       `json:"results"`
	Goals    []Goal         `json:"goals,omitempty"`
	Failures []string       `json:"failures,omitempty"`
}

// fastKeyRuns is the NATS publisher's fast_key_runs URL setting the
// options amount to: true, false or auto.
func (o Options) fastKeyRuns() string {
	switch {
	case o.FastKeyRuns:
		return "true"
	case o.NoKeyRuns:
		return "false"
	}
	return "auto"
}

type runner struct {
	o   Options
	rep *Report
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.o.Out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (r *runner) add(res Result) {
	r.rep.Results = append(r.rep.Results, res)
	r.logf("  %-9s %-34s %s", res.Workload, res.Case, formatMetrics(res.Metrics))
}

// Run runs the selected workloads and returns the report. A workload that
// fails is recorded in Failures and the others still run; the error is
// non-nil when any failed or the services are unreachable.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.withDefaults()
	for _, w := range o.Only {
		if !slices.Contains(Workloads, w) {
			return nil, fmt.Errorf("unknown workload %q (want one of %s)", w, strings.Join(Workloads, ", "))
		}
	}
	if isMySQL(o.DatabaseURL) {
		if err := mysqlOnly(&o); err != nil {
			return nil, err
		}
	}
	if o.FastKeyRuns && o.NoKeyRuns {
		return nil, errors.New("-fast-key-runs and -no-key-runs: choose one")
	}
	if err := Ping(ctx, o.DatabaseURL, o.NatsURL); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Quick: o.Quick, Machine: machine(ctx, o.DatabaseURL), Options: map[string]any{
		"drain_n": o.DrainN, "keys": o.Keys, "baseline_n": o.BaselineN, "write_seconds": o.WriteFor.Seconds(), "write_rounds": o.WriteRounds,
		"latency_seconds": o.LatencyFor.Seconds(), "latency_rates": o.LatencyRates, "latency_poisson": o.LatencyPoisson, "latency_slice_ms": o.LatencySlice.Milliseconds(), "latency_warmup_ms": o.LatencyWarmup.Milliseconds(), "scale_n": o.ScaleN,
		"scale_ack_delay_ms": float64(o.ScaleAckDelay) / float64(time.Millisecond), "history_n": o.HistoryN, "history_reps": o.HistoryReps,
		"fast_key_runs": o.fastKeyRuns(), "rounds": o.Rounds,
	}}
	var rounds [][]Goal
	for round := 1; round <= o.Rounds && ctx.Err() == nil; round++ {
		sub := runRound(ctx, o, round)
		addRatios(sub)
		rounds = append(rounds, goals(sub))
		if o.Rounds > 1 {
			for i := range sub.Results {
				res := &sub.Results[i]
				if res.Params == nil {
					res.Params = map[string]any{}
				}
				res.Params["round"] = round
				res.Case = fmt.Sprintf("%s (round %d)", res.Case, round)
			}
			for i, f := range sub.Failures {
				sub.Failures[i] = fmt.Sprintf("round %d: %s", round, f)
			}
		}
		rep.Results = append(rep.Results, sub.Results...)
		rep.Failures = append(rep.Failures, sub.Failures...)
	}
	rep.Goals = medianGoals(rounds)
	rep.Elapsed = time.Since(rep.Started).Seconds()
	fmt.Fprintln(o.Out)
	WriteTable(o.Out, rep)
	if o.OutDir != "" {
		if err := writeFiles(o.OutDir, rep); err != nil {
			return rep, err
		}
	}
	if len(rep.Failures) > 0 {
		return rep, fmt.Errorf("%d workload(s) failed: %s", len(rep.Failures), strings.Join(rep.Failures, "; "))
	}
	return rep, ctx.Err()
}

// runRound runs the selected workloads once, round being which time, and
// returns their results and failures; a workload that fails is recorded
// and the others still run.
func runRound(ctx context.Context, o Options, round int) *Report {
	sub := &Report{}
	r := &runner{o: o, rep: sub}
	if o.Rounds > 1 {
		r.logf("=== round %d of %d", round, o.Rounds)
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"limits", r.limits},
		{"drain", r.drainOurs},
		{"textbook", r.textbook},
		{"watermill", r.watermill},
		{"write", r.writePath},
		{"latency", r.latency},
		{"scale", r.scale},
		{"history", r.history},
	}
	for _, s := range steps {
		if !o.runs(s.name) {
			continue
		}
		r.logf("== %s", s.name)
		if err := s.fn(ctx); err != nil {
			r.logf("  %s FAILED: %v", s.name, err)
			sub.Failures = append(sub.Failures, s.name+": "+err.Error())
		}
		if ctx.Err() != nil {
			break
		}
	}
	return sub
}

// uniqueName returns prefix_<8 hex>, a valid schema, stream and subject token.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
