package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQuick runs the -quick mode end to end, so the harness never rots.
// Without PostgreSQL or NATS JetStream it skips, saying which, unless
// CI=true, where it fails. OUTBOX_TEST_DATABASE_URL and
// OUTBOX_TEST_NATS_URL override the services' URLs.
func TestQuick(t *testing.T) {
	o := Options{
		DatabaseURL: getenv("OUTBOX_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"),
		NatsURL:     getenv("OUTBOX_TEST_NATS_URL", "nats://127.0.0.1:4222"),
		Quick:       true,
		// The reference and our LISTEN/NOTIFY relay in one cell, in
		// turns: the shared cell runs too (the polling cells run alone).
		LatencySlice: 250 * time.Millisecond,
		OutDir:       t.TempDir(),
		Out:          testWriter{t, new([]byte)},
	}
	ctx := reachable(t, o)
	rep, err := Run(ctx, o)
	if errors.Is(err, ErrUnreachable) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"drain": 12, "write": 10, "latency": 4, "scale": 6, "history": 4}
	got := map[string]int{}
	for _, r := range rep.Results {
		got[r.Workload]++
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%s: %d results, want %d", w, got[w], n)
		}
	}
	// Each ordered drain is paired with its unordered twin and set against
	// JetStream's one-at-a-time rate, in the same run.
	ordered := 0
	for _, r := range rep.Results {
		if r.Workload == "drain" && r.Params["unordered"] == false {
			ordered++
			for _, m := range []string{"x_unordered", "x_js_sync", "x_plain", "relay_cpu_us"} {
				if _, ok := r.Metrics[m]; !ok {
					t.Errorf("%s: no %s in %v", r.Case, m, r.Metrics)
				}
			}
		}
	}
	if ordered != 2 {
		t.Errorf("%d ordered drains, want 2 (quick mode's keys 1 and 1000)", ordered)
	}
	// Every latency cell, the reference's included, splits its events'
	// way on the relay's side: each event is acked after it was sent.
	for _, r := range rep.Results {
		if r.Workload != "latency" {
			continue
		}
		if sent, acked := r.Metrics["send_p50_ms"], r.Metrics["ack_p50_ms"]; sent <= 0 || acked < sent {
			t.Errorf("%s: send p50 %.3f ms, ack p50 %.3f ms: want 0 < send ≤ ack", r.Case, sent, acked)
		}
		// Commit() returned → ack is the part of scheduled send → ack
		// after the writer's commit.
		if ca, acked := r.Metrics["commit_ack_p50_ms"], r.Metrics["ack_p50_ms"]; ca <= 0 || ca > acked {
			t.Errorf("%s: commit → ack p50 %.3f ms, ack p50 %.3f ms: want 0 < commit → ack ≤ ack", r.Case, ca, acked)
		}
		// Its parts: commit → handed to the broker's client, then handed
		// → acked; each is shorter than the whole at the median.
		if cs, sa, ca := r.Metrics["commit_send_p50_ms"], r.Metrics["send_ack_p50_ms"], r.Metrics["commit_ack_p50_ms"]; cs <= 0 || sa <= 0 || cs > ca || sa > ca {
			t.Errorf("%s: commit → send p50 %.3f ms, send → ack p50 %.3f ms, commit → ack p50 %.3f ms: want each part in (0, the whole]", r.Case, cs, sa, ca)
		}
		// The warm-up's events are sent and received, but not measured.
		if r.Metrics["received"] != r.Metrics["sent"] || num(r.Params["warmup_seconds"]) <= 0 {
			t.Errorf("%s: received %v of %v measured events, warm-up %v s: want all, after a warm-up",
				r.Case, r.Metrics["received"], r.Metrics["sent"], r.Params["warmup_seconds"])
		}
		if _, ok := r.Metrics["x_hand_commit_ack_p99"]; !ok && r.Params["reference"] == false {
			t.Errorf("%s: no x_hand_commit_ack_p99 in %v", r.Case, r.Metrics)
		}
	}
	for _, f := range []string{"results.json", "drain.svg", "latency.svg"} {
		if _, err := os.Stat(filepath.Join(o.OutDir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestQuickMySQL runs the -quick mode on MySQL/MariaDB (a mysql:// URL):
// the workloads that run there, with the same columns. Without MariaDB or
// NATS JetStream it skips, unless CI=true, where it fails.
// OUTBOX_TEST_MYSQL_URL overrides the database's URL.
func TestQuickMySQL(t *testing.T) {
	o := Options{
		DatabaseURL: getenv("OUTBOX_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test"),
		NatsURL:     getenv("OUTBOX_TEST_NATS_URL", "nats://127.0.0.1:4222"),
		Quick:       true,
		Out:         testWriter{t, new([]byte)},
	}
	ctx := reachable(t, o)
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"drain": 10, "scale": 6}
	got := map[string]int{}
	for _, r := range rep.Results {
		got[r.Workload]++
	}
	if !maps.Equal(got, want) {
		t.Errorf("results per workload: %v, want %v", got, want)
	}
	ordered := 0
	for _, r := range rep.Results {
		if r.Workload == "drain" && r.Params["unordered"] == false {
			ordered++
			for _, m := range []string{"x_unordered", "x_js_sync", "x_plain", "x_db_limit", "relay_cpu_us"} {
				if _, ok := r.Metrics[m]; !ok {
					t.Errorf("%s: no %s in %v", r.Case, m, r.Metrics)
				}
			}
			if _, ok := r.Metrics["pg_cpu_us"]; ok {
				t.Errorf("%s: PostgreSQL's CPU measured for a drain on MySQL", r.Case)
			}
		}
	}
	if ordered != 2 {
		t.Errorf("%d ordered drains, want 2 (quick mode's keys 1 and 1000)", ordered)
	}
	// The server's CPU is read from /proc where it runs on this machine.
	var table bytes.Buffer
	WriteTable(&table, rep)
	for _, r := range rep.Results {
		if _, ok := r.Metrics["mysql_cpu_us"]; ok && r.Workload == "drain" && !strings.Contains(table.String(), "| MySQL µs/ev |") {
			t.Fatalf("the table has no MySQL CPU column:\n%s", table.String())
		}
	}
	if _, err := Run(ctx, Options{DatabaseURL: o.DatabaseURL, NatsURL: o.NatsURL, Quick: true, Only: []string{"write"}, Out: io.Discard}); err == nil {
		t.Error("the write workload ran on MySQL")
	}
}

// TestQuickRounds runs the drain twice (-rounds 2): each round's cells
// are set against the same round's, and the goals are judged on the
// median of the rounds. Without PostgreSQL or NATS JetStream it skips,
// unless CI=true, where it fails.
func TestQuickRounds(t *testing.T) {
	o := Options{
		DatabaseURL: getenv("OUTBOX_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"),
		NatsURL:     getenv("OUTBOX_TEST_NATS_URL", "nats://127.0.0.1:4222"),
		Quick:       true,
		Only:        []string{"limits", "drain"},
		Rounds:      2,
		OutDir:      t.TempDir(),
		Out:         testWriter{t, new([]byte)},
	}
	ctx := reachable(t, o)
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	// Every cell once a round, named and numbered by its round.
	perRound := map[int]int{}
	rate := map[string]float64{} // events/s by case, round included
	for _, r := range rep.Results {
		round := int(num(r.Params["round"]))
		perRound[round]++
		if want := fmt.Sprintf(" (round %d)", round); !strings.HasSuffix(r.Case, want) {
			t.Errorf("%q: not named by its round %d", r.Case, round)
		}
		rate[r.Case] = r.Metrics["events_per_s"]
	}
	if want := map[int]int{1: 10, 2: 10}; !maps.Equal(perRound, want) {
		t.Errorf("results per round: %v, want %v", perRound, want)
	}
	// An ordered drain is set against its own round's unordered twin.
	for _, r := range rep.Results {
		if r.Workload != "drain" || r.Params["unordered"] != false || !strings.HasPrefix(r.Case, "outbox relay, ") {
			continue
		}
		twin := strings.Replace(r.Case, "ordered", "unordered", 1)
		if want := r.Metrics["events_per_s"] / rate[twin]; math.Abs(r.Metrics["x_unordered"]-want) > 1e-9 {
			t.Errorf("%s: × unordered %.4f, want %.4f (its round's twin, %q)", r.Case, r.Metrics["x_unordered"], want, twin)
		}
	}
	// The drain's goals, each with both rounds' values and their median.
	if len(rep.Goals) != 3 {
		t.Fatalf("goals %+v, want the drain's three", rep.Goals)
	}
	for _, g := range rep.Goals {
		if len(g.Rounds) != 2 || math.Abs(g.Value-(g.Rounds[0]+g.Rounds[1])/2) > 1e-9 {
			t.Errorf("%s: %.4f over rounds %v, want their mean", g.Goal, g.Value, g.Rounds)
		}
	}
	var table bytes.Buffer
	WriteTable(&table, rep)
	if !strings.Contains(table.String(), "### Issue 15's goals (the median of 2 rounds' worst cells)") {
		t.Errorf("no goals table over rounds in:\n%s", table.String())
	}
	b, err := os.ReadFile(filepath.Join(o.OutDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Goals) != 3 || len(back.Goals[0].Rounds) != 2 || num(back.Options["rounds"]) != 2 {
		t.Errorf("results.json: goals %+v, options %v: want the three goals over 2 rounds", back.Goals, back.Options)
	}
}

// reachable returns a context for a quick run of o, bounded to ten
// minutes; without o's database or NATS JetStream it skips the test,
// saying which, unless CI=true, where it fails.
func reachable(t *testing.T, o Options) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	if err := Ping(ctx, o.DatabaseURL, o.NatsURL); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%v (CI=true, so this fails instead of skipping)", err)
		}
		t.Skipf("skipping: %v", err)
	}
	return ctx
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// testWriter logs whole lines.
type testWriter struct {
	t   *testing.T
	buf *[]byte
}

func (w testWriter) Write(p []byte) (int, error) {
	*w.buf = append(*w.buf, p...)
	for {
		i := bytes.IndexByte(*w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Log(string((*w.buf)[:i]))
		*w.buf = (*w.buf)[i+1:]
	}
}
