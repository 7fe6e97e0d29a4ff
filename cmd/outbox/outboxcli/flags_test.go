package outboxcli_test

import (
	"context"
	"strings"
	"testing"
)

// unreachableDB is a database nobody serves: a command that connects
// before validating its flags says "cannot reach" instead of naming the
// flag.
var unreachableDB = []string{"--database-url", "postgres://bob:s3cret@127.0.0.1:1/app"}

// rejected asserts that args fail with one line naming what is wrong,
// before connecting to anything.
func rejected(t *testing.T, args []string, want ...string) {
	t.Helper()
	failsWith(t, args, want...)
	_, _, stderr := run(t, context.Background(), args...)
	if strings.Contains(stderr, "cannot reach") {
		t.Errorf("%v: connected before validating the flags: %s", args, stderr)
	}
}

func TestRelayFlagBounds(t *testing.T) {
	relay := func(extra ...string) []string { return append(append([]string{"relay"}, unreachableDB...), extra...) }
	for _, c := range []struct {
		args []string
		want []string
	}{
		{relay("--batch-size", "0"), []string{"--batch-size 0", "1 to 10000"}},
		{relay("--batch-size", "-1"), []string{"--batch-size -1"}},
		{relay("--batch-size", "10001"), []string{"--batch-size 10001"}},
		{relay("--workers", "0"), []string{"--workers 0", "1 to 64"}},
		{relay("--workers", "100000"), []string{"--workers 100000", "1 to 64"}},
		{relay("--max-attempts", "0"), []string{"--max-attempts 0"}},
		{relay("--poll-interval", "0s"), []string{"--poll-interval 0s"}},
		{relay("--poll-interval", "-1s"), []string{"--poll-interval -1s", "must not be negative"}},
		{relay("--publish-timeout", "0s"), []string{"--publish-timeout 0s"}},
		{relay("--publish-timeout", "-5s"), []string{"--publish-timeout -5s", "must not be negative"}},
		{relay("--store-timeout", "-1s"), []string{"--store-timeout -1s"}},
		{relay("--shutdown-timeout", "0s"), []string{"--shutdown-timeout 0s"}},
		{relay("--retention", "-1h"), []string{"--retention -1h0m0s", "must not be negative"}},
		{relay("--broker-wait", "-1s"), []string{"--broker-wait -1s"}},
		{relay("--claim-timeout", "0s"), []string{"--claim-timeout 0s"}},
		{relay("--embedded-port", "70000"), []string{"--embedded-port 70000"}},
		{relay("--keyed-failure", "skip"), []string{"--keyed-failure", `"skip"`}},
		{relay("--per-key", "0"), []string{"--per-key 0", "1 to 10000"}},
		{relay("--per-key", "10001"), []string{"--per-key 10001"}},
		// Contradictions.
		{relay("--publish-timeout", "30s"), []string{"--publish-timeout 30s must be below --claim-timeout 30s"}},
		{relay("--publish-timeout", "10s", "--claim-timeout", "5s"), []string{"--publish-timeout 10s must be below --claim-timeout 5s"}},
		{relay("--broker-url", "redis://127.0.0.1:1/0", "--stream", "EVENTS"), []string{"--stream is a NATS setting", "redis://"}},
		{relay("--broker-url", "amqp://guest:s3cret@127.0.0.1:1/", "--subject-prefix", "x"), []string{"--subject-prefix is a NATS setting"}},
		{relay("--keyed-failure", "dead-letter", "--unordered"), []string{"--keyed-failure and --unordered do not go together"}},
		{relay("--per-key", "10", "--unordered"), []string{"--per-key and --unordered do not go together"}},
		{relay("--broker-url", "nats://127.0.0.1:1", "--data-dir", "x"), []string{"--broker-url and --data-dir do not go together"}},
		{relay("--broker-url", "nats://127.0.0.1:1", "--embedded-port", "4222"), []string{"--broker-url and --embedded-port do not go together"}},
		{relay("--broker-url", "nats://127.0.0.1:1", "--stream", "EVENTS", "--subject-prefix", ""), []string{"--broker-url with --stream, --subject-prefix:", "subject_prefix is empty", "every subject (>)"}},
		{relay("--subject-prefix", ""), []string{"with --subject-prefix:", "subject_prefix is empty"}},
		{relay("--subject-prefix", "app.>"), []string{"with --subject-prefix:", `subject_prefix: "app.>": want dot-separated tokens`}},
		{relay("--subject-prefix", "app..x"), []string{"with --subject-prefix:", `"app..x"`}},
		{relay("--broker-url", "gopher://x"), []string{"unsupported scheme"}},
		{relay("--mode", "wal"), []string{"--mode", `"wal": want poll or cdc`}},
		{relay("--slot", "s"), []string{"--slot", "for --mode cdc only"}},
		{relay("--mode", "cdc", "--workers", "4"), []string{"--mode and --workers do not go together"}},
		{relay("--mode", "cdc", "--cdc-rows", "keep"), []string{"--cdc-rows", `"keep": want mark or insert-delete`}},
	} {
		rejected(t, c.args, c.want...)
	}
	// Several bad flags: all of them, on one line.
	rejected(t, relay("--batch-size", "0", "--workers", "0"), "--batch-size 0", "--workers 0")
}

// A flag set by its environment variable is named with it.
func TestFlagFromEnvironment(t *testing.T) {
	t.Setenv("OUTBOX_WORKERS", "0")
	rejected(t, append([]string{"relay"}, unreachableDB...), "--workers (OUTBOX_WORKERS) 0")
}

func TestEmptyIdentifiers(t *testing.T) {
	for _, cmd := range [][]string{
		{"migrate"}, {"status"}, {"dead"}, {"relay"}, {"dead", "retry", "--all"}, {"migrate", "--print"},
		{"replay", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"}, {"purge", "--dead-older-than", "1h"},
	} {
		rejected(t, append(append(cmd, unreachableDB...), "--schema", ""), "--schema is empty")
		rejected(t, append(append(cmd, unreachableDB...), "--table", ""), "--table is empty")
		rejected(t, append(append(cmd, "--database-url", "mysql://root@127.0.0.1:1/x"), "--schema", ""), "--schema is empty")
		rejected(t, append(append(cmd, "--database-url", "sqlite:"+t.TempDir()+"/x.db"), "--schema", ""), "--schema is empty")
	}
}

func TestListFlags(t *testing.T) {
	rejected(t, append([]string{"dead", "--limit", "0"}, unreachableDB...), "--limit 0", "1 to 10000")
	rejected(t, append([]string{"dead", "--limit", "-3"}, unreachableDB...), "--limit -3")
	rejected(t, append([]string{"dead", "retry", "--all", "--limit", "0"}, unreachableDB...), "--limit 0")
	rejected(t, append([]string{"dead", "retry", "--topic", "x", "01a2315b-56b8-7cb8-95f2-01c9b8497ea1"}, unreachableDB...), "--topic, --key and --older-than go with --all")
	rejected(t, append([]string{"dead-letter", "--reason", "", "01a2315b-56b8-7cb8-95f2-01c9b8497ea1"}, unreachableDB...), "--reason is empty")
}

func TestDemoFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--orders", "0"}, "--orders 0"},
		{[]string{"demo", "--orders", "-5"}, "--orders -5"},
		{[]string{"demo", "--relays", "0"}, "--relays 0"},
		{[]string{"demo", "--outage", "-1s"}, "--outage -1s: must not be negative"},
		{[]string{"demo", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"demo", "--outage", "30s"}, "the orders are confirmed over 1m30s"},
		{[]string{"demo", "--database-url", "postgres://x/y"}, "--database-url: the demo brings its own SQLite databases"},
	} {
		failsWith(t, c.args, c.want)
	}
}

// demo --help does not list the database flags it ignores; other
// commands' help does.
func TestDemoHelpHidesDatabaseFlags(t *testing.T) {
	code, out, _ := run(t, context.Background(), "demo", "--help")
	if code != 0 || strings.Contains(out, "--database-url") || strings.Contains(out, "--schema") || !strings.Contains(out, "--outage") {
		t.Fatalf("demo --help: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, context.Background(), "status", "--help")
	if code != 0 || !strings.Contains(out, "--database-url") {
		t.Fatalf("status --help: exit %d\n%s", code, out)
	}
}

// Every bound --help promises is the one the flags enforce.
func TestRelayHelpDocumentsBounds(t *testing.T) {
	_, out, _ := run(t, context.Background(), "relay", "--help")
	for _, want := range []string{"1 to 10000", "1 to 64", "below --claim-timeout", "--claim-timeout", "0: delete at once", "0: until interrupted",
		"subject outbox.T", "(0: a free one)"} {
		if !strings.Contains(out, want) {
			t.Errorf("relay --help does not say %q", want)
		}
	}
}
