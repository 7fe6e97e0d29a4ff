package outboxcli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/hostile"
)

// status tells due from scheduled (a NotBefore ahead is no lag), counts
// retrying events, and lists the keys a failing head blocks, with the
// head's ID, attempts and last error; --json carries the same.
func TestStatusDueScheduledBlocked(t *testing.T) { eachStore(t, testStatusDueScheduledBlocked) }

func testStatusDueScheduledBlocked(t *testing.T, e *env) {
	head := e.enqueue(
		outbox.Message{Topic: "orders", Key: "k1", Payload: []byte("head")},
		outbox.Message{Topic: "orders", Key: "k1", Payload: []byte("behind")},
		outbox.Message{Topic: "orders", Payload: []byte("later"), NotBefore: time.Now().Add(24 * time.Hour)},
	)[0]
	if n := e.fail(false, "broker said no"); n != 1 {
		t.Fatalf("claimed %d, want the head alone", n)
	}
	e.enqueue(outbox.Message{Topic: "orders", Payload: []byte("due")})

	code, out, stderr := e.cli("status")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, stderr)
	}
	// PENDING DUE SCHEDULED RETRYING: 4 pending; the head retries in an
	// hour and "later" is a day ahead (scheduled); "behind" and "due" are
	// due.
	if !regexpMatch(out, `(?m)^TOPIC\s+PENDING\s+DUE\s+SCHEDULED\s+RETRYING\s+OLDEST DUE\s+DEAD`) ||
		!regexpMatch(out, `(?m)^orders\s+4\s+2\s+2\s+1\s+\S+\s+0\s`) || !regexpMatch(out, `(?m)^\(all\)\s+4\s+2\s+2\s+1\s`) {
		t.Fatalf("status table:\n%s", out)
	}
	if !strings.Contains(out, "BLOCKED KEYS (1)") ||
		!regexpMatch(out, `(?m)^orders\s+k1\s+`+head.ID.String()+`\s+1\s+in \S+\s+1\s+broker said no$`) {
		t.Fatalf("status does not list the blocked key k1 with its head:\n%s", out)
	}

	code, out, _ = e.cli("status", "--json")
	var js struct {
		Topics []struct {
			Topic                   string
			Pending, Due, Scheduled int64
			Retrying                int64
			OldestDue               *time.Time `json:"oldest_due"`
			OldestDueAge            float64    `json:"oldest_due_age_seconds"`
			OldestPending           *time.Time `json:"oldest_pending"`
		}
		Blocked []struct {
			Topic, Key string
			HeadID     string `json:"head_id"`
			Attempts   int
			LastError  string `json:"last_error"`
			Behind     int64
		}
	}
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if len(js.Topics) != 1 || js.Topics[0].Pending != 4 || js.Topics[0].Due != 2 || js.Topics[0].Scheduled != 2 || js.Topics[0].Retrying != 1 ||
		js.Topics[0].OldestDue == nil || js.Topics[0].OldestPending == nil {
		t.Fatalf("status --json topics: %s", out)
	}
	if len(js.Blocked) != 1 || js.Blocked[0].HeadID != head.ID.String() || js.Blocked[0].Key != "k1" || js.Blocked[0].Attempts != 1 ||
		js.Blocked[0].LastError != "broker said no" || js.Blocked[0].Behind != 1 {
		t.Fatalf("status --json blocked: %s", out)
	}
}

// An event scheduled far ahead is not lag: OLDEST DUE is "-" when nothing
// is due.
func TestStatusScheduledIsNoLag(t *testing.T) { eachStore(t, testStatusScheduledIsNoLag) }

func testStatusScheduledIsNoLag(t *testing.T, e *env) {
	e.enqueue(outbox.Message{Topic: "reminders", NotBefore: time.Now().Add(30 * 24 * time.Hour)})
	_, out, _ := e.cli("status")
	if !regexpMatch(out, `(?m)^reminders\s+1\s+0\s+1\s+0\s+-\s+0\s`) || !strings.Contains(out, "no blocked keys") {
		t.Fatalf("status:\n%s", out)
	}
}

// Control characters in topics, keys, types and errors are escaped in
// the tables (a topic cannot paint the terminal or fake a row) and exact
// in JSON.
func TestHostileStringsEscaped(t *testing.T) { eachStore(t, testHostileStringsEscaped) }

func testHostileStringsEscaped(t *testing.T, e *env) {
	for i, s := range hostile.Strings {
		e.enqueue(outbox.Message{Topic: s, Key: fmt.Sprintf("k%d%s", i, s), Type: s})
	}
	e.fail(false, "refused:\x1b[2J\r\nFAKE ROW") // every head blocks its key
	_, status, _ := e.cli("status")
	_, statusJSON, _ := e.cli("status", "--json")
	e.fail(true, "x") // nothing due: the heads retry in an hour
	ids := e.enqueue(outbox.Message{Topic: "t\x1b[31m", Key: "key\nFAKE", Type: "Type\r\n"})
	e.fail(true, "err\x1b]0;title\x07\nFAKE")
	_, dead, _ := e.cli("dead")
	_, deadJSON, _ := e.cli("dead", "--json")

	for name, out := range map[string]string{"status": status, "dead": dead} {
		for _, c := range []string{"\x1b", "\r", "\t", "\x7f", "\u00a0", "\u2028", "\x07"} {
			if strings.Contains(out, c) {
				t.Errorf("%s prints %q raw:\n%s", name, c, out)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAKE") {
				t.Errorf("%s printed a fake row: %q", name, l)
			}
		}
	}
	for _, want := range []string{`"\x1b[31mred\x1b[0m"`, `"new\nline"`, `"\ttab"`, `" a"`, `"a "`, "žluťoučký kůň ☃", "emoji 🙂", `"refused:\x1b[2J\r\nFAKE ROW"`} {
		if !strings.Contains(status, want) {
			t.Errorf("status does not show %s:\n%s", want, status)
		}
	}
	for _, want := range []string{`"t\x1b[31m"`, `"key\nFAKE"`, `"Type\r\n"`, `"err\x1b]0;title\a\nFAKE"`, ids[0].ID.String()} {
		if !strings.Contains(dead, want) {
			t.Errorf("dead does not show %s:\n%s", want, dead)
		}
	}
	// JSON: the exact strings.
	var sj struct {
		Topics  []struct{ Topic string }
		Blocked []struct {
			Key       string
			LastError string `json:"last_error"`
		}
	}
	if err := json.Unmarshal([]byte(statusJSON), &sj); err != nil {
		t.Fatal(err)
	}
	topics := map[string]bool{}
	for _, tp := range sj.Topics {
		topics[tp.Topic] = true
	}
	for _, s := range hostile.Strings {
		if !topics[s] {
			t.Errorf("status --json lacks topic %q", s)
		}
	}
	if len(sj.Blocked) == 0 || sj.Blocked[0].LastError != "refused:\x1b[2J\r\nFAKE ROW" {
		t.Errorf("status --json blocked: %+v", sj.Blocked)
	}
	var dj struct {
		Dead []struct {
			Topic, Key, Type string
			LastError        string `json:"last_error"`
		}
	}
	if err := json.Unmarshal([]byte(deadJSON), &dj); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range dj.Dead {
		if d.Topic == "t\x1b[31m" && d.Key == "key\nFAKE" && d.Type == "Type\r\n" && d.LastError == "err\x1b]0;title\x07\nFAKE" {
			found = true
		}
	}
	if !found {
		t.Errorf("dead --json does not carry the exact strings:\n%s", deadJSON)
	}
}

// dead says when it stopped at its limit.
func TestDeadSaysWhenLimited(t *testing.T) { eachStore(t, testDeadSaysWhenLimited) }

func testDeadSaysWhenLimited(t *testing.T, e *env) {
	for range 3 {
		e.enqueue(outbox.Message{Topic: "orders"})
	}
	e.fail(true, "no")
	_, out, _ := e.cli("dead", "--limit", "2")
	if len(lines(out)) != 5 || !strings.Contains(out, "2 listed, 3 dead events match in all") || !strings.Contains(out, "… more: next page with --after ") {
		t.Fatalf("dead --limit 2 of 3:\n%s", out)
	}
	_, out, _ = e.cli("dead", "--limit", "3")
	if len(lines(out)) != 5 || !strings.Contains(out, "3 listed, 3 dead events match in all") || strings.Contains(out, "more") {
		t.Fatalf("dead --limit 3 of 3:\n%s", out)
	}
}
