package faults

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
)

// `outbox relay --mode cdc --metrics-addr` serves the CDC relay's metrics
// (its counters, its lag and its slot's), and `outbox status` shows the
// slot: active, its retained WAL and lag.
func TestCDCMetricsAndStatus(t *testing.T) {
	db, br := newLogicalPostgres(t), newNATS(t)
	ctx := context.Background()
	keys := []string{"k0", "k1"}
	if err := db.prepare(ctx, keys); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	env := slices.Concat(os.Environ(), db.env(), br.env(), []string{envCDCArgs + "=--metrics-addr=" + addr})
	cw := startCDCRelays(t, db, br, env, helperLog(t), 1)
	metric := func(name string) (float64, bool) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		return v, err == nil
	}
	const n = 50
	commitEvents(t, db, keys, n)
	waitFor(t, "the CDC relay's metrics to count the events", 60*time.Second, func() bool {
		v, ok := metric("outbox_cdc_published_events_total")
		return ok && v >= n
	})
	for _, name := range []string{"outbox_cdc_active", "outbox_cdc_slot_up"} {
		if v, ok := metric(name); !ok || v != 1 {
			t.Errorf("%s = %v (served: %v), want 1", name, v, ok)
		}
	}
	for _, name := range []string{"outbox_cdc_slot_lag_bytes", "outbox_cdc_slot_retained_wal_bytes", "outbox_cdc_lag_seconds"} {
		if _, ok := metric(name); !ok {
			t.Errorf("%s not served", name)
		}
	}
	if v, ok := metric(`outbox_published_events_total\{topic="orders"\}`); !ok || v < n {
		t.Errorf("outbox_published_events_total{topic=\"orders\"} = %v (served: %v), want at least %d", v, ok, n)
	}

	// /readyz: ready while streaming; not ready, saying why, while the
	// broker is down and the stream paused; ready again after.
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	waitFor(t, "/readyz ok while streaming", 60*time.Second, func() bool { code, _ := readyz(); return code == http.StatusOK })
	if err := br.stop(); err != nil {
		t.Fatal(err)
	}
	commitEvents(t, db, keys, 5)
	waitFor(t, "/readyz to say the stream is paused", 60*time.Second, func() bool {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "CDC stream paused") && strings.Contains(body, "broker is unavailable")
	})
	if err := br.start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz ok once the broker is back", 120*time.Second, func() bool { code, _ := readyz(); return code == http.StatusOK })

	status := func(args ...string) string {
		var out, errOut bytes.Buffer
		base := []string{"status", "--database-url", db.url, "--schema", db.schema}
		if code := outboxcli.Main(ctx, append(base, args...), &out, &errOut); code != 0 {
			t.Fatalf("outbox status exited %d: %s", code, errOut.String())
		}
		return out.String()
	}
	out := status()
	if !strings.Contains(out, "REPLICATION SLOTS (1)") || !regexp.MustCompile(`(?m)^outbox_cdc\s+yes\s+reserved\s+\d`).MatchString(out) {
		t.Errorf("outbox status shows no active slot outbox_cdc:\n%s", out)
	}
	if js := status("--json"); !strings.Contains(js, `"replication_slots"`) || !strings.Contains(js, `"retained_wal_bytes"`) {
		t.Errorf("outbox status --json has no replication_slots:\n%s", js)
	}
	// Stopped, the relay's slot pins WAL; status says it is inactive.
	for _, p := range cw.relays {
		p.close()
	}
	waitFor(t, "the slot inactive", 30*time.Second, func() bool { return cw.active() < 0 })
	if out := status(); !regexp.MustCompile(`(?m)^outbox_cdc\s+no\s`).MatchString(out) {
		t.Errorf("outbox status does not show the slot inactive:\n%s", out)
	}
}
