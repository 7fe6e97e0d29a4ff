package outboxcli_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// --embedded-port already in use fails at once, naming the port; it does
// not wait for a server that will never be ready.
func TestEmbeddedPortInUse(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + dir + "/app.db"
	if code, out, stderr := run(t, context.Background(), "migrate", "--database-url", url); code != 0 {
		t.Fatalf("migrate: %s%s", out, stderr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	// A safety net only: a relay that hangs fails here, not at the
	// package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, stdout, stderr := run(t, ctx, "relay", "--database-url", url, "--data-dir", dir+"/nats", "--embedded-port", fmt.Sprint(port))
	ls := lines(stderr)
	if ctx.Err() != nil || code != 1 || len(ls) == 0 {
		t.Fatalf("exit %d (deadline passed: %v):\n%s%s", code, ctx.Err() != nil, stdout, stderr)
	}
	last := ls[len(ls)-1]
	if !strings.HasPrefix(last, "outbox: ") || !strings.Contains(last, fmt.Sprint(port)) || strings.Contains(last, "not ready within") {
		t.Fatalf("last line %q does not name the port taken", last)
	}
	if strings.Contains(stdout, "embedded NATS JetStream at") {
		t.Fatalf("the relay announced a broker that did not start:\n%s", stdout)
	}
}
