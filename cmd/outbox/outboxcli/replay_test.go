package outboxcli_test

import (
	"strings"
	"testing"

	"github.com/outboxgo/outbox"
)

// replay lists every keyed dead event it would publish out of its key's
// order and replays nothing without --out-of-order; unkeyed events need no
// such word.
func TestReplayKeyedOutOfOrder(t *testing.T) { eachStore(t, testReplayKeyedOutOfOrder) }

func testReplayKeyedOutOfOrder(t *testing.T, e *env) {
	msgs := e.enqueue(
		outbox.Message{Topic: "orders", Key: "k1"},
		outbox.Message{Topic: "orders", Key: "k2\x1b[31m"},
		outbox.Message{Topic: "orders"},
	)
	if n := e.fail(true, "refused"); n != 3 {
		t.Fatalf("%d dead, want 3", n)
	}
	k1, k2, unkeyed := msgs[0].ID.String(), msgs[1].ID.String(), msgs[2].ID.String()

	code, out, stderr := e.cli("dead", "retry", k1, k2, unkeyed)
	if code != 1 || !strings.Contains(stderr, "2 keyed events would be published out of their key's order: retried none; pass --out-of-order") {
		t.Fatalf("dead retry of keyed events without --out-of-order: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, "out of order: "+k1+" (topic orders, key k1)") || !strings.Contains(out, "out of order: "+k2+` (topic orders, key "k2\x1b[31m")`) ||
		strings.Contains(out, unkeyed) {
		t.Fatalf("replay does not list each keyed event, alone:\n%s", out)
	}
	if _, dead, _ := e.cli("dead"); len(lines(dead)) != 5 {
		t.Fatalf("a refused replay replayed something:\n%s", dead)
	}

	code, out, stderr = e.cli("dead", "retry", unkeyed, "01a2315b-56b8-7cb8-95f2-01c9b8497ea1")
	if code != 0 || !strings.Contains(out, "retried 1 of 2 named events (the others were not dead)") {
		t.Fatalf("replay of an unkeyed event: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = e.cli("dead", "retry", "--all", "--out-of-order")
	if code != 0 || !strings.Contains(out, "out of order: "+k1) || !strings.Contains(out, "retried 2 dead events") {
		t.Fatalf("replay --all --out-of-order: exit %d\n%s%s", code, out, stderr)
	}
	if _, st, _ := e.cli("status"); !regexpMatch(st, `(?m)^orders\s+3\s+3\s+0\s+0\s+\S+\s+0\s`) {
		t.Fatalf("status after the replays:\n%s", st)
	}
	// Nothing dead any more: replaying a named event replays nothing (an
	// empty selection is not "every dead event").
	if code, out, _ := e.cli("dead", "retry", k1); code != 0 || !strings.Contains(out, "retried 0 of 1") {
		t.Fatalf("replay of a pending event: exit %d\n%s", code, out)
	}
}

// replay --all takes the oldest --limit, and says when more remain.
func TestReplayAllLimit(t *testing.T) { eachStore(t, testReplayAllLimit) }

func testReplayAllLimit(t *testing.T, e *env) {
	for range 3 {
		e.enqueue(outbox.Message{Topic: "orders"})
	}
	e.fail(true, "refused")
	code, out, _ := e.cli("dead", "retry", "--all", "--limit", "2")
	if code != 0 || !strings.Contains(out, "retried 2 dead events; more remain: run again") {
		t.Fatalf("replay --all --limit 2 of 3: exit %d\n%s", code, out)
	}
	code, out, _ = e.cli("dead", "retry", "--all", "--limit", "2")
	if code != 0 || out != "retried 1 dead events\n" {
		t.Fatalf("replay --all --limit 2 of 1: exit %d\n%s", code, out)
	}
}

func TestReplayAndDeadLetterHelp(t *testing.T) {
	e := &env{t: t}
	_, out, _ := e.cli("dead", "retry", "--help")
	for _, want := range []string{"published AFTER them", "blocks the key anew", "enqueued after", "--out-of-order"} {
		if !strings.Contains(out, want) {
			t.Errorf("dead retry --help does not say %q", want)
		}
	}
	_, out, _ = e.cli("dead-letter", "--help")
	if !strings.Contains(out, "keeps the broker's last error") || !strings.Contains(out, "<reason>; last error:") {
		t.Errorf("dead-letter --help does not say the last error is kept:\n%s", out)
	}
}

// dead-letter keeps the broker's last error, with the reason beside it.
func TestDeadLetterKeepsLastError(t *testing.T) { eachStore(t, testDeadLetterKeepsLastError) }

func testDeadLetterKeepsLastError(t *testing.T, e *env) {
	id := e.enqueue(outbox.Message{Topic: "orders", Key: "k"})[0].ID.String()
	e.fail(false, "nats: no responders")
	if code, out, stderr := e.cli("dead-letter", id, "--reason", "skipped by ops"); code != 0 || !strings.Contains(out, "dead-lettered 1 of 1") {
		t.Fatalf("dead-letter: exit %d\n%s%s", code, out, stderr)
	}
	_, out, _ := e.cli("dead")
	if !strings.Contains(out, "skipped by ops; last error: nats: no responders") {
		t.Fatalf("dead does not show the reason beside the last error:\n%s", out)
	}
}
