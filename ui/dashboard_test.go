package ui_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/ui"
)

// The dashboard in a real browser: its numbers are the table's, its
// search finds events by ID and by key, it updates itself, and its Retry
// and Discard buttons revive a dead event (which a relay then publishes
// to the broker) and delete one.
func TestDashboardInBrowser(t *testing.T) {
	b := setup(t, &ui.Options{SampleEvery: 100 * time.Millisecond, Refresh: 200 * time.Millisecond})
	s := b.seed(t)
	ctx := browser(t)

	run(t, ctx, chromedp.Navigate(b.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#total-pending")))
	checks := map[string]string{
		"#total-pending":   "status = 0",
		"#total-due":       "status = 0 AND available_at <= now()",
		"#total-scheduled": "status = 0 AND available_at > now()",
		"#total-retrying":  "status = 0 AND attempts > 0",
		"#total-dead":      "status = 2",
		"#total-published": "status = 1",
	}
	for sel, where := range checks {
		if got, want := text(t, ctx, sel), strconv.FormatInt(b.count(t, where), 10); got != want {
			t.Errorf("%s shows %s, the table has %s (%s)", sel, got, want, where)
		}
	}
	for _, topic := range []string{"orders", "payments"} {
		sel := fmt.Sprintf(`tr.topic[data-topic=%q] td.pending`, topic)
		if got, want := text(t, ctx, sel), strconv.FormatInt(b.count(t, "status = 0 AND topic = $1", topic), 10); got != want {
			t.Errorf("topic %s shows %s pending, the table has %s", topic, got, want)
		}
	}
	for _, m := range s.dead {
		if n := count(t, ctx, fmt.Sprintf(`tr.dead-event[data-id=%q]`, m.ID)); n != 1 {
			t.Errorf("dead event %s listed %d times, want once", m.ID, n)
		}
	}
	if got := text(t, ctx, fmt.Sprintf(`tr.blocked-key[data-key=%q] td:nth-child(3)`, blockedKey)); got != s.head.ID.String() {
		t.Errorf("blocked key %s shows head %q, want %s", blockedKey, got, s.head.ID)
	}
	if got := text(t, ctx, fmt.Sprintf(`tr.blocked-key[data-key=%q] td:nth-child(6)`, blockedKey)); got != "1" {
		t.Errorf("blocked key %s shows %q behind, want 1", blockedKey, got)
	}

	// Search: by event ID, then by key.
	id := s.pending[2].ID.String()
	fill(t, ctx, "#q", id)
	click(t, ctx, "#search")
	waitCount(t, ctx, fmt.Sprintf(`tr.found[data-id=%q]`, id), 1)
	if n := count(t, ctx, "tr.found"); n != 1 {
		t.Errorf("search by ID found %d events, want 1", n)
	}
	fill(t, ctx, "#q", blockedKey)
	click(t, ctx, "#search")
	waitCount(t, ctx, fmt.Sprintf(`tr.found[data-id=%q]`, s.behind.ID), 1)
	if n := count(t, ctx, "tr.found"); n != 2 {
		t.Errorf("search by key %s found %d events, want its 2 pending", blockedKey, n)
	}
	if got := text(t, ctx, fmt.Sprintf(`tr.found[data-id=%q] td.state`, s.head.ID)); got != "pending" {
		t.Errorf("the head's state shows %q, want pending", got)
	}

	// Live: an event enqueued now shows without a reload.
	run(t, ctx, chromedp.Navigate(b.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#total-pending")))
	eval[bool](t, ctx, `window.notReloaded = true`)
	live := b.enqueue(t, outbox.Message{Topic: "orders", Type: "OrderConfirmed", Payload: []byte(`{"order":99}`)})[0]
	waitText(t, ctx, "#total-pending", strconv.FormatInt(b.count(t, "status = 0"), 10))
	waitText(t, ctx, `tr.topic[data-topic="orders"] td.pending`, "6")
	if !eval[bool](t, ctx, `window.notReloaded === true`) {
		t.Error("the page reloaded to show the new event")
	}

	// Relays seen: a connection named as a relay, in a transaction (a
	// claim held), shows with its claim's age.
	name := fmt.Sprintf("outbox relay ui-test-%d", time.Now().UnixNano())
	cfg, err := pgx.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = name
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(context.Background())
	if err == nil {
		_, err = tx.Exec(context.Background(), "SELECT 1")
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := fmt.Sprintf(`tr.seen[data-name=%q]`, name)
	waitCount(t, ctx, seen, 1)
	if got := text(t, ctx, seen+" td:nth-child(3)"); got != "1" {
		t.Errorf("the relay seen shows %s connections, want 1", got)
	}
	// The row may first come from a sample taken between the connection
	// and its BEGIN, with no claim yet: wait for the claim's age.
	waitEvalUntil(t, ctx, "the relay seen holding a claim shows its claim's age", textOf(seen+" td.claim"),
		func(got string) bool { return got != "–" && got != "" })
	_ = tx.Rollback(context.Background())
	_ = conn.Close(context.Background())
	waitCount(t, ctx, seen, 0)

	// A relay to a broker of this test's own drains what is due; the
	// blocked key stays blocked.
	srv := natstest.StartServer(t, "")
	nc := srv.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	js := natstest.JetStream(t, nc)
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: srv.URL(), SubjectPrefix: prefix, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	// Its pool is named as the CLI names a relay's, so the dashboard sees
	// it connected too.
	pcfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "outbox relay ui-test pid 1"
	rpool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpool.Close)
	rdb, err := postgres.New(rpool, &postgres.Config{Schema: b.schema})
	if err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(rdb.Store(), pub, &relay.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.dash.AddRelay("test-relay", r.Stats)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop relay: %v", err)
		}
	})
	drained := len(s.pending) + 1
	natstest.WaitForCount(t, js, stream, drained, waitFor)
	waitText(t, ctx, "#total-pending", "2") // the blocked head and the event behind it
	waitText(t, ctx, "tr.relay td.published", strconv.Itoa(drained))
	waitCount(t, ctx, "#charts svg", 3) // throughput is charted once the relay is known
	waitCount(t, ctx, `tr.seen[data-name="outbox relay ui-test pid 1"]`, 1)
	screenshot(t, ctx)

	// Retry: the dead event goes to the broker.
	retried := s.dead[0].ID.String()
	click(t, ctx, fmt.Sprintf(`tr.dead-event[data-id=%q] button.retry`, retried))
	waitText(t, ctx, "#flash", "retried event "+retried+": it is pending again, and the relay publishes it next")
	msgs := natstest.WaitForCount(t, js, stream, drained+1, waitFor)
	if !hasMsgID(msgs, retried) {
		t.Fatalf("the retried event %s did not arrive at the broker (%d messages)", retried, len(msgs))
	}
	if hasMsgID(msgs, s.dead[1].ID.String()) || hasMsgID(msgs, s.head.ID.String()) {
		t.Error("an event that was not retried arrived at the broker")
	}
	waitCount(t, ctx, fmt.Sprintf(`tr.dead-event[data-id=%q]`, retried), 0)
	if !hasMsgID(msgs, live.ID.String()) {
		t.Errorf("the event enqueued live did not arrive at the broker")
	}

	// Discard: the other dead event is deleted.
	discarded := s.dead[1].ID.String()
	click(t, ctx, fmt.Sprintf(`tr.dead-event[data-id=%q] button.discard`, discarded))
	waitText(t, ctx, "#flash", "discarded event "+discarded+": it is deleted")
	if n := b.count(t, "id = $1", s.dead[1].ID); n != 0 {
		t.Errorf("the discarded event is still in the table (%d rows)", n)
	}
	waitText(t, ctx, "#total-dead", "0")
	waitText(t, ctx, "#dead .note", "no dead events")
}

func hasMsgID(msgs []jetstream.Msg, id string) bool {
	for _, m := range msgs {
		if m.Headers().Get("Nats-Msg-Id") == id {
			return true
		}
	}
	return false
}
