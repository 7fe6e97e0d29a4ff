package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bundle is one test's flow: its own schema, stream and dead-letter stream,
// the real relay and the worker.
type bundle struct {
	app              *App
	stream, dlStream string
	calls            atomic.Int32
}

func setup(t *testing.T, provider func() error) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	dlPrefix, dlStream := natstest.NewStream(t, nc)
	b := &bundle{stream: stream, dlStream: dlStream}
	cfg := Config{Schema: pgtest.Schema(t, pool), Stream: stream, Prefix: prefix, DeadSubject: dlPrefix + ".workspace-worker",
		MaxDeliver: 3, Retry: 10 * time.Millisecond}
	app, err := NewApp(pool, cfg, func(ctx context.Context, workspaceID, name, key string) error {
		b.calls.Add(1)
		return provider()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := app.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	running, err := app.Start(ctx, natstest.URL(), natstest.JetStream(t, nc))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := running.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	b.app = app
	return b
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.app.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The provider succeeds: the notification is published once, the command
// row is cleared, the workspace renamed, the inbox holds the command's ID.
func TestCommandSucceedsNotificationPublished(t *testing.T) {
	b := setup(t, func() error { return nil })
	nc := natstest.Connect(t)
	js := natstest.JetStream(t, nc)
	cmdID, err := b.app.RequestUpdate(context.Background(), "ws-1", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	msgs := natstest.WaitForCount(t, js, b.stream, 2, 60*time.Second)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d events, want the command and its notification", len(msgs))
	}
	req, done := msgs[0], msgs[1]
	if req.Subject() != b.app.cfg.Prefix+"."+TopicRequested || done.Subject() != b.app.cfg.Prefix+"."+TopicCompleted {
		t.Fatalf("subjects %s, %s", req.Subject(), done.Subject())
	}
	var got UpdateCompleted
	if err := json.Unmarshal(done.Data(), &got); err != nil {
		t.Fatal(err)
	}
	if got != (UpdateCompleted{CommandID: cmdID, WorkspaceID: "ws-1", Name: "Acme"}) {
		t.Fatalf("notification %+v", got)
	}
	reqID := req.Headers().Get("Nats-Msg-Id")
	if done.Headers().Get("causation-id") != reqID {
		t.Fatalf("notification's causation-id %q, want the command event's ID %s", done.Headers().Get("causation-id"), reqID)
	}
	s := b.app.cfg.Schema
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".workspace_update_commands`); n != 0 {
		t.Fatalf("%d command rows left, want 0", n)
	}
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".workspaces WHERE name = 'Acme'`); n != 1 {
		t.Fatal("the workspace was not renamed")
	}
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".workspace_worker_inbox WHERE id = $1`, uuid.MustParse(reqID)); n != 1 {
		t.Fatal("the inbox does not hold the command event's ID")
	}
	if c := b.calls.Load(); c != 1 {
		t.Fatalf("provider called %d times, want 1", c)
	}
}

// The provider fails every time: the command is retried MaxDeliver times,
// then dead-lettered; no notification is ever enqueued or published, and
// the command row stays.
func TestProviderFailsNoNotification(t *testing.T) {
	b := setup(t, func() error { return errors.New("503 Service Unavailable") })
	nc := natstest.Connect(t)
	js := natstest.JetStream(t, nc)
	if _, err := b.app.RequestUpdate(context.Background(), "ws-1", "Acme"); err != nil {
		t.Fatal(err)
	}
	dead := natstest.WaitForCount(t, js, b.dlStream, 1, 60*time.Second)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want the command", len(dead))
	}
	if e := dead[0].Headers().Get(natspub.HeaderError); e != "provider: 503 Service Unavailable" {
		t.Fatalf("dead letter's error %q", e)
	}
	if c := b.calls.Load(); c != 3 {
		t.Fatalf("provider called %d times, want MaxDeliver = 3", c)
	}
	s := b.app.cfg.Schema
	// Nothing was enqueued: the relay has nothing left to publish, ever.
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".messages WHERE topic = $1`, TopicCompleted); n != 0 {
		t.Fatalf("%d notifications enqueued, want 0", n)
	}
	waitFor(t, "the relay to drain the outbox", 30*time.Second, func() bool {
		return b.count(t, `SELECT count(*) FROM "`+s+`".messages`) == 0
	})
	if msgs := natstest.WaitForCount(t, js, b.stream, 1, 10*time.Second); len(msgs) != 1 ||
		msgs[0].Subject() != b.app.cfg.Prefix+"."+TopicRequested {
		t.Fatalf("stream holds %d events, want only the command", len(msgs))
	}
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".workspace_update_commands WHERE status = 'pending'`); n != 1 {
		t.Fatal("the failed command's row is gone")
	}
	if n := b.count(t, `SELECT count(*) FROM "`+s+`".workspace_worker_inbox`); n != 0 {
		t.Fatalf("%d inbox records, want 0", n)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, not waiting for time to pass
	}
}
