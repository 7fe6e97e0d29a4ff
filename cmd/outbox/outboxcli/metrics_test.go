package outboxcli_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// outbox relay --metrics-addr serves /healthz, /readyz and the relay's
// metrics while it runs, and stops serving when it stops.
func TestRelayServesMetrics(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + dir + "/app.db"
	if code, out, stderr := run(t, context.Background(), "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := run(t, ctx, "relay", "--database-url", url, "--data-dir", dir+"/nats", "--metrics-addr", addr)
		done <- result{code, out, stderr}
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path) //nolint:noctx // a test's plain GET
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _ := get("/healthz"); code == http.StatusOK {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the relay exited %d before serving /healthz:\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no /healthz within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s, want 200", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "outbox_relay_claims_total") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, want the relay's and the runtime's metrics:\n%.500s", code, body)
	}
	cancel()
	r := <-done
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "serving metrics") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code, _ := get("/healthz"); code != 0 {
		t.Errorf("/healthz still answers %d after the relay stopped", code)
	}
}

func TestMetricsFlags(t *testing.T) {
	url := "sqlite://" + t.TempDir() + "/app.db"
	failsWith(t, []string{"relay", "--database-url", url, "--metrics-addr", "9090"}, "--metrics-addr", "want host:port")
	failsWith(t, []string{"relay", "--database-url", url, "--ready-max-lag", "1m"}, "--ready-max-lag needs --metrics-addr")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if code, out, stderr := run(t, context.Background(), "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	failsWith(t, []string{"relay", "--database-url", url, "--data-dir", t.TempDir(), "--metrics-addr", ln.Addr().String()},
		"--metrics-addr", fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
}
