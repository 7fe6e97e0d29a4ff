package outboxcli_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/stores"
)

// publish claims what is due and marks it published at the time at (kept,
// as a relay with --retention does). It returns how many it published.
func (e *env) publish(at time.Time) int {
	e.t.Helper()
	ctx := context.Background()
	b, err := e.store.Claim(ctx, stores.ClaimParams{Limit: 1000, Now: time.Now(), Unordered: true})
	if err != nil {
		e.t.Fatal(err)
	}
	o := stores.Outcome{Now: at}
	for _, r := range b.Records() {
		o.Published = append(o.Published, r.ID)
	}
	if err := b.Complete(ctx, o); err != nil {
		e.t.Fatal(err)
	}
	return len(b.Records())
}

// counts are the table's dead, published and pending events, of every
// topic.
func (e *env) counts() (dead, published, pending int64) {
	e.t.Helper()
	st, err := e.store.Stats(context.Background(), stores.StatsParams{Now: time.Now()})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range st {
		dead, published, pending = dead+s.Dead, published+s.Published, pending+s.Pending
	}
	return dead, published, pending
}

// cliJSON runs the CLI with --json and decodes what it printed into v.
func (e *env) cliJSON(v any, args ...string) {
	e.t.Helper()
	code, out, stderr := e.cli(append(args, "--json")...)
	if code != 0 {
		e.t.Fatalf("%v --json: exit %d\n%s%s", args, code, out, stderr)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("%v --json printed no JSON (%v):\n%s", args, err, out)
	}
}

// dead list pages by cursor through every dead event, oldest first, and
// prints the total; the filters select by topic, key and age.
func TestDeadListPages(t *testing.T) { eachStore(t, testDeadListPages) }

func testDeadListPages(t *testing.T, e *env) {
	old := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Microsecond)
	msgs := e.enqueue(
		outbox.Message{Topic: "orders", Key: "k1", CreatedAt: old},
		outbox.Message{Topic: "orders", Key: "k2", CreatedAt: old.Add(time.Second)},
		outbox.Message{Topic: "payments", Key: "k1", CreatedAt: old.Add(2 * time.Second)},
		outbox.Message{Topic: "orders"},
		outbox.Message{Topic: "orders", Key: "k1"},
	)
	dead := 0
	for range 5 { // a claim takes each key's head only
		dead += e.fail(true, "refused")
	}
	if dead != 5 {
		t.Fatalf("%d dead, want 5", dead)
	}

	// Page by page, by the printed cursor.
	var got []string
	args := []string{"dead", "list", "--limit", "2"}
	for page := 0; ; page++ {
		code, out, stderr := e.cli(args...)
		if code != 0 || !strings.Contains(out, "dead events match in all") || !strings.Contains(out, ", 5 dead events match") {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
		for _, l := range lines(out)[1:] {
			if id, _, ok := strings.Cut(l, " "); ok && uuid.Validate(id) == nil {
				got = append(got, id)
			}
		}
		_, cursor, more := strings.Cut(out, "… more: next page with --after ")
		if !more {
			break
		}
		args = []string{"dead", "list", "--limit", "2", "--after", strings.TrimSpace(cursor)}
		if page > 5 {
			t.Fatal("the pages do not end")
		}
	}
	want := []string{msgs[0].ID.String(), msgs[1].ID.String(), msgs[2].ID.String()}
	if !slices.Equal(got[:3], want) || len(got) != 5 || !slices.Contains(got, msgs[3].ID.String()) || !slices.Contains(got, msgs[4].ID.String()) {
		t.Fatalf("pages listed %v, want %v then the two new ones", got, want)
	}

	// The JSON shape, and the filters.
	var page struct {
		Dead []struct {
			ID        string    `json:"id"`
			Topic     string    `json:"topic"`
			Key       string    `json:"key"`
			CreatedAt time.Time `json:"created_at"`
			LastError string    `json:"last_error"`
		} `json:"dead"`
		Total int64  `json:"total"`
		More  bool   `json:"more"`
		Next  string `json:"next"`
	}
	e.cliJSON(&page, "dead", "list", "--key", "k1", "--limit", "1")
	if len(page.Dead) != 1 || page.Dead[0].ID != msgs[0].ID.String() || page.Total != 3 || !page.More || page.Next == "" ||
		page.Dead[0].LastError != "refused" || !page.Dead[0].CreatedAt.Equal(old) {
		t.Fatalf("dead list --key k1 --limit 1 --json: %+v", page)
	}
	page.Next = ""
	e.cliJSON(&page, "dead", "--topic", "orders", "--older-than", "1h")
	if len(page.Dead) != 2 || page.Dead[1].ID != msgs[1].ID.String() || page.Total != 2 || page.More || page.Next != "" {
		t.Fatalf("dead --topic orders --older-than 1h --json: %+v", page)
	}
	if code, _, stderr := e.cli("dead", "list", "--after", "yesterday"); code != 1 || !strings.Contains(stderr, "--after") || !strings.Contains(stderr, "not a cursor") {
		t.Fatalf("dead list --after yesterday: exit %d, %s", code, stderr)
	}
}

// dead show prints every field; a JSON payload as it is, any other in
// base64.
func TestDeadShow(t *testing.T) { eachStore(t, testDeadShow) }

func testDeadShow(t *testing.T, e *env) {
	msgs := e.enqueue(
		outbox.Message{Topic: "orders", Key: "k\x1b[31m", Type: "OrderPlaced", Payload: []byte(`{"id": 42, "note": "ça"}`),
			Headers: map[string]string{"traceparent": "00-abc-def-01", "x-note": "ça ☃"}},
		outbox.Message{Topic: "blobs", Payload: []byte{0, 1, 0xff, '\x1b'}},
	)
	e.fail(true, "broker said no\x1b]0;t\x07")

	code, out, stderr := e.cli("dead", "show", msgs[0].ID.String())
	if code != 0 {
		t.Fatalf("dead show: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"ID:", msgs[0].ID.String(), "Topic:", "orders", `"k\x1b[31m"`, "OrderPlaced", "Attempts:", "Created:",
		`Last error:`, `"broker said no\x1b]0;t\a"`, "traceparent:", "00-abc-def-01", "x-note:", "ça ☃", "Payload:", "bytes, json",
		`{"id": 42, "note": "ça"}`} {
		if !strings.Contains(out, want) {
			t.Errorf("dead show does not print %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\r\x07") {
		t.Errorf("dead show prints a control character raw:\n%q", out)
	}
	_, out, _ = e.cli("dead", "show", msgs[1].ID.String())
	if !strings.Contains(out, "4 bytes, base64") || !strings.Contains(out, base64.StdEncoding.EncodeToString(msgs[1].Payload)) || strings.Contains(out, "\x1b") {
		t.Fatalf("dead show of a binary payload:\n%q", out)
	}

	var show struct {
		ID              string            `json:"id"`
		Key             string            `json:"key"`
		Headers         map[string]string `json:"headers"`
		Attempts        int               `json:"attempts"`
		LastError       string            `json:"last_error"`
		PayloadEncoding string            `json:"payload_encoding"`
		Payload         json.RawMessage   `json:"payload"`
	}
	e.cliJSON(&show, "dead", "show", msgs[0].ID.String())
	var payload map[string]any
	if err := json.Unmarshal(show.Payload, &payload); err != nil || payload["id"] != 42.0 || show.PayloadEncoding != "json" ||
		show.Key != msgs[0].Key || show.Headers["x-note"] != "ça ☃" || show.Attempts != 1 || show.LastError != "broker said no\x1b]0;t\x07" {
		t.Fatalf("dead show --json: %+v (payload %s)", show, show.Payload)
	}
	e.cliJSON(&show, "dead", "show", msgs[1].ID.String())
	var b64 string
	if err := json.Unmarshal(show.Payload, &b64); err != nil || show.PayloadEncoding != "base64" || b64 != base64.StdEncoding.EncodeToString(msgs[1].Payload) {
		t.Fatalf("dead show --json of a binary payload: %+v", show)
	}

	pending := e.enqueue(outbox.Message{Topic: "orders"})[0].ID.String()
	if code, _, stderr := e.cli("dead", "show", pending); code != 1 || !strings.Contains(stderr, "no dead event "+pending) || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("dead show of a pending event: exit %d, %q", code, stderr)
	}
}

// dead discard deletes named dead events at once, a selection only with
// --yes; nothing else.
func TestDeadDiscard(t *testing.T) { eachStore(t, testDeadDiscard) }

func testDeadDiscard(t *testing.T, e *env) {
	old := time.Now().Add(-48 * time.Hour)
	msgs := e.enqueue(
		outbox.Message{Topic: "orders", CreatedAt: old},
		outbox.Message{Topic: "orders", CreatedAt: old.Add(time.Second)},
		outbox.Message{Topic: "payments", CreatedAt: old.Add(2 * time.Second)},
		outbox.Message{Topic: "orders"},
		outbox.Message{Topic: "orders"},
	)
	e.fail(true, "refused")
	pending := e.enqueue(outbox.Message{Topic: "orders"})[0].ID.String()

	code, out, stderr := e.cli("dead", "discard", msgs[4].ID.String(), pending)
	if code != 0 || out != "discarded 1 of 2 named events (the others were not dead)\n" {
		t.Fatalf("dead discard by ID: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = e.cli("dead", "discard", "--all", "--topic", "orders", "--older-than", "24h")
	if code != 1 || !strings.Contains(stderr, "would discard 2 dead events (topic orders, created more than 24h0m0s ago): discarded none; pass --yes") {
		t.Fatalf("dead discard --all without --yes: exit %d\n%s%s", code, out, stderr)
	}
	if dead, _, pend := e.counts(); dead != 4 || pend != 1 {
		t.Fatalf("after a refused discard: %d dead, %d pending; want 4 and 1", dead, pend)
	}
	var res struct {
		Discarded int64 `json:"discarded"`
		Matched   int64 `json:"matched"`
	}
	e.cliJSON(&res, "dead", "discard", "--all", "--topic", "orders", "--older-than", "24h", "--yes")
	if res.Discarded != 2 || res.Matched != 2 {
		t.Fatalf("dead discard --all --yes --json: %+v, want 2 of 2", res)
	}
	var page struct {
		Dead []struct {
			ID string `json:"id"`
		} `json:"dead"`
	}
	e.cliJSON(&page, "dead")
	if len(page.Dead) != 2 || page.Dead[0].ID != msgs[2].ID.String() || page.Dead[1].ID != msgs[3].ID.String() {
		t.Fatalf("dead after discarding: %+v, want %s and %s", page, msgs[2].ID, msgs[3].ID)
	}
	if code, _, stderr := e.cli("dead", "discard"); code != 1 || !strings.Contains(stderr, "by ID, or pass --all") {
		t.Fatalf("dead discard of nothing: exit %d, %s", code, stderr)
	}
}

// purge deletes published events past retention and dead events past an
// age, each by its own bound, and says how many.
func TestPurge(t *testing.T) { eachStore(t, testPurge) }

func testPurge(t *testing.T, e *env) {
	now := time.Now()
	e.enqueue(outbox.Message{Topic: "orders"}, outbox.Message{Topic: "orders"})
	e.publish(now.Add(-3 * time.Hour))
	e.enqueue(outbox.Message{Topic: "orders"})
	e.publish(now)
	e.enqueue(outbox.Message{Topic: "orders", CreatedAt: now.Add(-72 * time.Hour)}, outbox.Message{Topic: "orders"})
	e.fail(true, "refused")

	if code, _, stderr := e.cli("purge"); code != 1 || !strings.Contains(stderr, "--published-older-than, --dead-older-than or both") {
		t.Fatalf("purge with no bound: exit %d, %s", code, stderr)
	}
	code, out, stderr := e.cli("purge", "--published-older-than", "1h")
	if code != 0 || !strings.HasPrefix(out, "purged 2 published events (published before ") || len(lines(out)) != 1 {
		t.Fatalf("purge --published-older-than 1h: exit %d\n%s%s", code, out, stderr)
	}
	if dead, pub, _ := e.counts(); dead != 2 || pub != 1 {
		t.Fatalf("after purging published: %d dead, %d published; want 2 and 1", dead, pub)
	}
	var res struct {
		Published  int64      `json:"published"`
		Dead       int64      `json:"dead"`
		DeadBefore *time.Time `json:"dead_before"`
	}
	e.cliJSON(&res, "purge", "--dead-older-than", "48h")
	if res.Published != 0 || res.Dead != 1 || res.DeadBefore == nil || res.DeadBefore.After(now.Add(-47*time.Hour)) {
		t.Fatalf("purge --dead-older-than 48h --json: %+v", res)
	}
	if dead, pub, _ := e.counts(); dead != 1 || pub != 1 {
		t.Fatalf("after purging dead: %d dead, %d published; want 1 and 1", dead, pub)
	}
	if code, _, stderr := e.cli("purge", "--dead-older-than", "-1h"); code != 1 || !strings.Contains(stderr, "must not be negative") {
		t.Fatalf("purge --dead-older-than -1h: exit %d, %s", code, stderr)
	}
}

// replay sends published events of a time range again, with their IDs;
// it refuses when the range holds none.
func TestReplayPublished(t *testing.T) { eachStore(t, testReplayPublished) }

func testReplayPublished(t *testing.T, e *env) {
	base := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	msgs := e.enqueue(
		outbox.Message{Topic: "orders", Key: "k1", CreatedAt: base},
		outbox.Message{Topic: "orders", Key: "k2", CreatedAt: base.Add(time.Minute)},
		outbox.Message{Topic: "payments", Key: "k1", CreatedAt: base.Add(2 * time.Minute)},
		outbox.Message{Topic: "orders", Key: "k1", CreatedAt: base.Add(time.Hour)},
	)
	if n := e.publish(time.Now()); n != 4 {
		t.Fatalf("published %d, want 4", n)
	}
	from, to := base.Format(time.RFC3339), base.Add(30*time.Minute).Format(time.RFC3339)

	code, out, stderr := e.cli("replay", "--from", from, "--to", to, "--topic", "orders")
	if code != 0 || !strings.Contains(out, "replayed 2 published events created from 2026-01-02T10:00:00Z to 2026-01-02T10:30:00Z") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, stderr)
	}
	b, err := e.store.Claim(context.Background(), stores.ClaimParams{Limit: 10, Now: time.Now().Add(time.Minute), Unordered: true})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]uuid.UUID, 0, 2)
	for _, r := range b.Records() {
		got = append(got, r.ID)
	}
	_ = b.Abort(context.Background())
	slices.SortFunc(got, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	want := []uuid.UUID{msgs[0].ID, msgs[1].ID}
	slices.SortFunc(want, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	if !slices.Equal(got, want) {
		t.Fatalf("pending after replay: %v, want the same IDs %v", got, want)
	}

	var res struct {
		Republished int64 `json:"republished"`
		More        bool  `json:"more"`
	}
	e.cliJSON(&res, "replay", "--from", from, "--to", to, "--key", "k1", "--limit", "1")
	if res.Republished != 1 || !res.More {
		t.Fatalf("replay --key k1 --limit 1 --json: %+v", res)
	}
	if _, pub, pend := e.counts(); pub != 1 || pend != 3 {
		t.Fatalf("after the replays: %d published, %d pending; want 1 and 3", pub, pend)
	}

	// Nothing published in the range (or retention off): it says so.
	code, out, stderr = e.cli("replay", "--from", "2025-01-01T00:00:00Z", "--to", "2025-02-01T00:00:00Z", "--topic", "orders")
	if code != 1 || out != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "no published events created in that range of topic orders are in the table: replayed none") ||
		!strings.Contains(stderr, "--retention") {
		t.Fatalf("replay of an empty range: exit %d\n%s%s", code, out, stderr)
	}
	if code, _, stderr := e.cli("replay", "--from", to, "--to", from); code != 1 || !strings.Contains(stderr, "is not before --to") {
		t.Fatalf("replay --from after --to: exit %d, %s", code, stderr)
	}
	if code, _, stderr := e.cli("replay", "--from", "yesterday", "--to", to); code != 1 || !strings.Contains(stderr, "not an RFC 3339 time") {
		t.Fatalf("replay --from yesterday: exit %d, %s", code, stderr)
	}
}
