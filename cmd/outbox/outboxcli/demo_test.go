package outboxcli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

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
