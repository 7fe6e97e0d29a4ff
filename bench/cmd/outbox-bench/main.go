// Command outbox-bench runs the outbox benchmark suite on real PostgreSQL
// (or, for the limits, drain and scale workloads, MySQL/MariaDB: a
// mysql:// -database-url) and NATS JetStream and prints a table; with -out
// it also writes results.json and SVG charts. See docs/benchmarks.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/outboxgo/outbox/bench"
)

func main() {
	var o bench.Options
	var only, keys, rates, cpuProfile string
	flag.StringVar(&o.DatabaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL URL, or mysql://user:pass@host:3306/db for MySQL/MariaDB (workloads "+strings.Join(bench.MySQLWorkloads, ",")+")")
	flag.StringVar(&o.NatsURL, "nats-url", "nats://127.0.0.1:4222", "NATS JetStream URL")
	flag.BoolVar(&o.FastKeyRuns, "fast-key-runs", false, "fail unless the NATS publisher pipelines a key's events in fast-ingest batches (nats-server 2.14 or later; by default it does where the server can)")
	flag.BoolVar(&o.NoKeyRuns, "no-key-runs", false, "the NATS publisher's NoKeyRuns: a key's events one at a time even where the server could take fast-ingest batches")
	flag.BoolVar(&o.Quick, "quick", false, "one short iteration of everything (CI)")
	flag.StringVar(&o.OutDir, "out", "", "directory for results.json and the SVG charts")
	flag.StringVar(&only, "only", "", "comma-separated workloads to run: "+strings.Join(bench.Workloads, ","))
	flag.IntVar(&o.Rounds, "rounds", 1, "run the selected workloads this many times, one after another, and judge issue 15's goals on the median of the rounds' worst cells")
	flag.IntVar(&o.DrainN, "n", 0, "events per drain of the outbox relay and of the limits (default 1000000; quick 2000)")
	flag.StringVar(&keys, "keys", "", "comma-separated key counts of the drain's ordered and unordered pairs, e.g. 1,10,100,1000,10000,100000 (default 1000; quick 1,1000)")
	flag.IntVar(&o.BaselineN, "baseline-n", 0, "events per drain of the textbook loop and Watermill (default 100000; quick 2000)")
	flag.DurationVar(&o.WriteFor, "write-duration", 0, "duration of each write-path cell in each round (default 5s; quick 200ms)")
	flag.IntVar(&o.WriteRounds, "write-rounds", 0, "rounds of the write-path cells, taking turns in a rotating order; a cell reports its median (default 3; quick 1)")
	flag.DurationVar(&o.LatencyFor, "latency-duration", 0, "duration of each latency cell (default 10s; quick 1s)")
	flag.StringVar(&rates, "latency-rates", "", "comma-separated event rates of the latency cells, per second (default 100,1000,5000; quick 100)")
	flag.BoolVar(&o.LatencyPoisson, "latency-poisson", false, "schedule the latency cells' events as a Poisson process (random gaps) instead of evenly")
	flag.DurationVar(&o.LatencySlice, "latency-slice", 0, "put the hand-written reference and our LISTEN/NOTIFY relay in one latency cell, taking turns of this length (e.g. 2s); default: a cell each, one after the other")
	flag.DurationVar(&o.LatencyWarmup, "latency-warmup", 0, "events each latency cell sends each relay before it measures, as a duration at the cell's rate (default 1s; quick 200ms; negative: none)")
	flag.IntVar(&o.ScaleN, "scale-n", 0, "events per scale cell (default 100000; quick 2000)")
	flag.DurationVar(&o.ScaleAckDelay, "scale-ack-delay", 0, "broker delay per acknowledged message in the scale workload (default 1ms)")
	flag.IntVar(&o.HistoryN, "history-n", 0, "published rows kept for the history workload (default 10000000; quick 100000)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (the relays under test run in this process) to this file")
	flag.Parse()
	if o.Rounds < 1 {
		fmt.Fprintf(os.Stderr, "outbox-bench: -rounds %d: want 1 or more\n", o.Rounds)
		os.Exit(2)
	}
	if only != "" {
		o.Only = strings.Split(only, ",")
	}
	o.Keys = positives("keys", keys)
	o.LatencyRates = positives("latency-rates", rates)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "outbox-bench: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	if _, err := bench.Run(ctx, o); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintf(os.Stderr, "outbox-bench: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("done in %v\n", time.Since(start).Round(time.Second))
}

// positives parses the comma-separated positive numbers of flag name, or
// exits with a line naming the bad one.
func positives(name, list string) []int {
	var out []int
	for _, v := range strings.Split(list, ",") {
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "outbox-bench: -%s: %q is not a positive number\n", name, v)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}
