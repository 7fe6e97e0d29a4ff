package nats_test

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/subscribers"
)

// TestStopDuringOutage: Stop while the connection is down returns within
// its context, with no error — whether the reader waits in the iterator
// for messages that do not come ("idle"), a handler is in flight, or the
// connection goes down while Stop waits for that handler, after the
// iterator has drained. The handler in flight finishes and commits, and
// neither the iterator's drain nor the ack that cannot reach the server
// holds Stop up (the ack's own timeout is a minute). The subscriber's
// goroutines end, and nothing is lost: once the path is back, the next
// subscriber of the durable gets every message the first left
// unacknowledged — the one it committed (a duplicate, acknowledged without
// a second run), the one it had fetched but not started, and the one it
// never fetched.
func TestStopDuringOutage(t *testing.T) {
	for _, m := range []stopMode{stopIdle, stopInFlight, cutDuringStop} {
		t.Run(m.String(), func(t *testing.T) { testStopDuringOutage(t, m) })
	}
}

// stopMode is where the subscriber is when the path to the server is cut.
type stopMode int

const (
	stopIdle      stopMode = iota // nothing to do: the reader waits in the iterator; cut, then Stop
	stopInFlight                  // a handler runs; cut, then Stop
	cutDuringStop                 // a handler runs; Stop drains the iterator, then the cut
)

func (m stopMode) String() string {
	return [...]string{"idle", "handler in flight", "cut during Stop"}[m]
}

func testStopDuringOutage(t *testing.T, mode stopMode) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // last: after every connection is closed
	u, err := url.Parse(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	px := tcpproxy.Start(t, u.Host)
	e := newSubEnv(t, "nats://"+px.Addr)
	in, pool, effects := effectsInbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	count := func(id uuid.UUID) int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+effects+` WHERE msg_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	evs := make([]outbox.Message, 3)
	for i := range evs {
		evs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Type: "OrderConfirmed", Payload: []byte("{}"),
			CreatedAt: time.Now().UTC()}
	}
	// Every message handled once, and nothing left at the server.
	handled := func() bool {
		for _, ev := range evs {
			if count(ev.ID) != 1 {
				return false
			}
		}
		return e.held(t, "stop") == 0
	}
	inside, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	runs := map[uuid.UUID]int{}
	h := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		mu.Lock()
		runs[m.ID]++
		hold := mode != stopIdle && m.ID == evs[0].ID && runs[m.ID] == 1
		mu.Unlock()
		if hold {
			close(inside)
			<-release
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+effects+` (msg_id) VALUES ($1)`, m.ID)
		return err
	}
	c := subscribertest.Config{Inbox: in, Handler: h, Group: "stop", Options: subscribers.Options{Concurrency: 1}}
	nc := e.connect(t, e.subURL)
	cfg := e.config(c)
	cfg.AckTimeout = time.Minute // past Stop's context: Stop must not wait for it
	sub, err := outboxnats.NewSubscriber(natstest.JetStream(t, nc), in, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.publish(t, evs...)
	if mode != stopIdle {
		select {
		case <-inside:
		case <-ctx.Done():
			t.Fatal("the handler did not get the first message within 60s")
		}
	} else {
		waitUntil(ctx, t, "every message handled before the outage", handled)
	}

	restored := false
	t.Cleanup(func() {
		if !restored {
			px.Restore(t)
		}
	})
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer stopCancel()
	stopped := make(chan error, 1)
	if mode == cutDuringStop {
		subs := nc.NumSubscriptions()
		go func() { stopped <- sub.Stop(stopCtx) }()
		waitUntil(ctx, t, "Stop to drain the iterator (its subscription to go)", func() bool { return nc.NumSubscriptions() < subs })
		px.Cut()
	} else {
		px.Cut()
		go func() { stopped <- sub.Stop(stopCtx) }()
	}
	close(release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop during the outage = %v, want nil: it waited on a server it cannot reach", err)
		}
	case <-ctx.Done():
		t.Fatal("Stop during the outage did not return within 60s")
	}
	if n := count(evs[0].ID); n != 1 {
		t.Fatalf("the first message has %d effects after Stop, want 1 (the handler in flight finishes)", n)
	}

	px.Restore(t)
	restored = true
	next, err := e.newSub(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(ctx, t, "the next subscriber to handle every message", handled)
	if err := next.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, ev := range evs {
		if runs[ev.ID] != 1 {
			t.Errorf("message %d: the handler ran %d times, want 1", i, runs[ev.ID])
		}
	}
}

// waitUntil polls cond until it holds, failing the test when ctx ends
// first.
func waitUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded by ctx
	}
}

// effectsInbox is an inbox in a PostgreSQL schema of the test's own, with
// an effects table (msg_id) beside it for the handler to write to.
func effectsInbox(t *testing.T) (in *inbox.Inbox[pgx.Tx], pool *pgxpool.Pool, effects string) {
	t.Helper()
	pool = pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := db.Inbox().Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	effects = `"` + schema + `".effects`
	if _, err := pool.Exec(ctx, `CREATE TABLE `+effects+` (msg_id uuid NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	in, err = inbox.New(db.Inbox(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return in, pool, effects
}
