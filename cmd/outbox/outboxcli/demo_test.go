package outboxcli_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/outboxgo/outbox/cmd/outbox/outboxcli"
)

// `outbox demo` needs nothing but this process: SQLite files in a
// temporary directory and an embedded NATS server.
func TestDemo(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := outboxcli.Main(ctx, []string{"demo", "--orders", "50", "--outage", "500ms"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	if !regexpMatch(out, `(?m)^verification: OK: every confirmed order has exactly one reservation \(50/50\); 0 lost, 0 applied twice`) {
		t.Fatalf("no verification line:\n%s", out)
	}
	for _, want := range []string{"broker DOWN", "broker UP", "confirmed 50/50"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoRejectsArgs(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := outboxcli.Main(context.Background(), []string{"demo", "extra"}, &stdout, &stderr); code == 0 {
		t.Fatal("demo with an argument succeeded")
	}
}

// Ctrl-C during the outage: the demo stops, cleans up, and says
// "interrupted" with exit 130 — not "context canceled", exit 1.
func TestDemoInterruptedDuringOutage(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- outboxcli.Main(ctx, []string{"demo", "--orders", "200", "--outage", "5s"}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stdout.String(), "broker DOWN") {
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before the outage:\n%s%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no outage within 2m:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
	cancel() // Ctrl-C
	stopped := time.Now()
	code := <-done
	t.Logf("stopped %v after the interrupt", time.Since(stopped))
	if code != outboxcli.ExitInterrupted || stderr.String() != "outbox: interrupted\n" {
		t.Fatalf("exit %d, stderr %q; want %d and \"outbox: interrupted\"", code, stderr.String(), outboxcli.ExitInterrupted)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Fatalf("the interrupted demo left %v behind", left)
	}
}
