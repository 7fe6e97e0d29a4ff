package pgcdc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	outboxnats "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/pgcdc"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// A committed event is published with its fields; a rolled-back one never
// is; published rows are deleted; the slot's position advances.
func TestCommitPublishedRollbackNever(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(), e.publisher())
	before := e.confirmed()
	a, b := msg("k"), msg("")
	a.Headers = map[string]string{"traceparent": "00-abc-01"}
	e.insert(false, a, b)
	rolled := msg("k")
	e.insert(true, rolled)
	c := msg("k")
	e.insert(false, c)
	got := e.read(3)
	if len(got) != 3 {
		t.Fatalf("stream holds %d messages, want 3", len(got))
	}
	seen := pos(ids(t, got))
	if _, ok := seen[rolled.ID]; ok {
		t.Error("the rolled-back event was published")
	}
	for _, m := range []outbox.Message{a, b, c} {
		if _, ok := seen[m.ID]; !ok {
			t.Errorf("event %s not published", m.ID)
		}
	}
	first := got[seen[a.ID]]
	h := first.Headers()
	if h.Get("traceparent") != "00-abc-01" || string(first.Data()) != "p-k" || h.Get(outboxnats.HeaderKey) != "k" ||
		h.Get(outboxnats.HeaderType) != "T" || h.Get(outboxnats.HeaderCreatedAt) != a.CreatedAt.Format(time.RFC3339Nano) {
		t.Errorf("event a arrived as headers %v, payload %q; want traceparent, key k, type T, created at %s and payload p-k",
			h, first.Data(), a.CreatedAt.Format(time.RFC3339Nano))
	}
	e.waitFor("the published rows are deleted", 30*time.Second, func() bool { return e.count(0) == 0 })
	e.waitFor("the slot's position advances", 30*time.Second, func() bool { return e.confirmed() > before })
	if s := r.Stats(); s.Published != 3 || s.Decoded != 3 {
		t.Errorf("stats %+v, want 3 decoded and published", s)
	}
}

// One transaction with many events over several keys, and a second one:
// each key's events arrive in commit order, with a publisher that keeps
// one event of a key in flight and with one that pipelines (OrderKeeper).
func TestPerKeyOrder(t *testing.T) {
	for _, c := range []struct {
		name      string
		pipelined bool
		window    int // 0: the default, more than a transaction holds
	}{
		{"pipelined=false", false, 0},
		{"pipelined=true", true, 0},
		// Transactions of 500 events through a window of 100: their
		// events go out before their commit is read.
		{"window=100", false, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			var pub publishers.Publisher = e.publisher()
			if c.pipelined {
				pub = orderKeeper{pub}
			}
			cfg := e.config()
			cfg.BatchSize = 64
			cfg.Window = c.window
			e.start(cfg, pub)
			var want []outbox.Message
			for tx := range 2 {
				var msgs []outbox.Message
				for i := range 500 {
					msgs = append(msgs, msg(fmt.Sprintf("k%d", (i+tx)%7)))
				}
				e.insert(false, msgs...)
				want = append(want, msgs...)
			}
			got := ids(t, e.read(len(want)))
			if len(got) != len(want) {
				t.Fatalf("stream holds %d, want %d", len(got), len(want))
			}
			at := pos(got)
			last := map[string]int{}
			for _, m := range want {
				i, ok := at[m.ID]
				if !ok {
					t.Fatalf("event %s missing", m.ID)
				}
				if p, seen := last[m.Key]; seen && i < p {
					t.Fatalf("key %s: an event committed later was published first", m.Key)
				}
				last[m.Key] = i
			}
		})
	}
}

type orderKeeper struct{ publishers.Publisher }

func (orderKeeper) KeepsKeyOrder() bool { return true }

// A relay stopped hard after the broker's ack and before the slot's
// confirmation: its successor sends the events again with the same IDs,
// which JetStream's dedup window drops.
func TestHardStopResendsSameIDs(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acked := make(chan struct{})
	cfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) {
		cancel() // stop hard: nothing of this call is confirmed or marked
		select {
		case <-acked:
		default:
			close(acked)
		}
	}
	r, err := pgcdc.New(cfg, e.publisher())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the relay streams", 30*time.Second, func() bool { return r.Active() || ctx.Err() != nil })
	before := e.confirmed()
	const n = 20
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprintf("k%d", i%3)))
	}
	e.insert(false, msgs...)
	<-acked
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = r.Stop(sctx)
	first := len(e.read(1))
	if e.confirmed() != before {
		t.Fatal("the slot's position moved past events the relay did not finish")
	}
	if pending := e.count(0); pending != n {
		t.Fatalf("%d rows pending after the hard stop, want %d", pending, n)
	}
	// The successor resumes from the slot's confirmed position.
	pub := e.publisher()
	e.start(e.config(), pub)
	e.waitFor("the successor marks every row", 30*time.Second, func() bool { return e.count(0) == 0 })
	got := e.read(n)
	if len(got) != n {
		t.Fatalf("stream holds %d messages, want %d: a duplicate got through or an event was lost", len(got), n)
	}
	if d := pub.Duplicates(); d != int64(first) {
		t.Errorf("the broker dropped %d duplicates, want %d (the events the first relay had published)", d, first)
	}
	t.Logf("first relay published %d before its hard stop; the successor re-sent them, all dropped by the dedup window", first)
}

// A failing keyed event holds its key while other keys flow; under
// DeadLetterKey it is dead after MaxAttempts (its row written dead) and
// its key goes on; under BlockKey it is retried until it succeeds.
func TestFailingEventBlocksItsKey(t *testing.T) {
	for _, policy := range []relay.FailurePolicy{relay.DeadLetterKey, relay.BlockKey} {
		t.Run(policy.String(), func(t *testing.T) {
			e := newEnv(t)
			pub := newFailing(e.publisher())
			cfg := e.config()
			cfg.KeyedFailure, cfg.MaxAttempts = policy, 3
			r := e.start(cfg, pub)
			bad, after := msg("a"), msg("a")
			others := []outbox.Message{msg("b"), msg("b"), msg("")}
			pub.set(bad.ID, errBroker)
			e.insert(false, append([]outbox.Message{bad, after}, others...)...)
			e.read(len(others))
			// The others flowed; the bad one is retried and holds "after".
			e.waitFor("the bad event retried", 30*time.Second, func() bool { return pub.triesOf(bad.ID) >= 2 })
			defer func() {
				// Whatever happened after: no try of "after" came before
				// the bad event's last one.
				lastBad, firstAfter := -1, -1
				for i, id := range pub.sentLog() {
					switch {
					case id == bad.ID:
						lastBad = i
					case id == after.ID && firstAfter < 0:
						firstAfter = i
					}
				}
				if firstAfter >= 0 && firstAfter < lastBad {
					t.Error("an event behind a failing one of its key was sent while it still failed")
				}
			}()
			if policy == relay.BlockKey {
				e.waitFor("several retries", 30*time.Second, func() bool { return pub.triesOf(bad.ID) >= 5 })
				if pub.triesOf(after.ID) != 0 || e.count(2) != 0 {
					t.Fatal("BlockKey let the key go on or made the event dead")
				}
				pub.set(bad.ID, nil)
				e.waitFor("both published", 30*time.Second, func() bool { return len(pub.acked()) == 5 })
				at := pos(pub.acked())
				if at[bad.ID] > at[after.ID] {
					t.Fatal("the key's order broke")
				}
				return
			}
			e.waitFor("the dead row", 30*time.Second, func() bool { return e.count(2) == 1 })
			var lastErr string
			var attempts int
			if err := e.pool.QueryRow(context.Background(), `SELECT last_error, attempts FROM `+e.table+` WHERE id = $1`, bad.ID).
				Scan(&lastErr, &attempts); err != nil {
				t.Fatal(err)
			}
			if attempts != 3 || lastErr != errBroker.Error() {
				t.Errorf("dead row: attempts %d, last_error %q", attempts, lastErr)
			}
			e.read(len(others) + 1)
			e.waitFor("the other rows deleted", 30*time.Second, func() bool { return e.count(0) == 0 })
			if s := r.Stats(); s.Dead != 1 {
				t.Errorf("stats %+v, want 1 dead", s)
			}
		})
	}
}

// A permanent rejection dead-letters an unkeyed event at once.
func TestPermanentDeadAtOnce(t *testing.T) {
	e := newEnv(t)
	pub := newFailing(e.publisher())
	e.start(e.config(), pub)
	m := msg("")
	pub.set(m.ID, publishers.Permanent(errBroker))
	e.insert(false, m)
	e.waitFor("the dead row", 30*time.Second, func() bool { return e.count(2) == 1 })
	if n := pub.triesOf(m.ID); n != 1 {
		t.Errorf("sent %d times, want 1", n)
	}
}

// With the broker down the stream pauses: nothing is confirmed past the
// unpublished events, nothing is charged, and everything arrives once the
// broker is back.
func TestBrokerOutagePausesAndResumes(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(), e.publisher())
	e.insert(false, msg("k"))
	e.read(1)
	e.nats.Shutdown()
	var msgs []outbox.Message
	for i := range 200 {
		msgs = append(msgs, msg(fmt.Sprintf("k%d", i%5)))
	}
	held := e.insertBefore(msgs[:100]...)
	e.waitFor("the relay sees the outage", 30*time.Second, func() bool { return r.Stats().Outages > 0 })
	e.insert(false, msgs[100:]...)
	e.waitFor("more probes", 30*time.Second, func() bool { return r.Stats().Outages > 2 })
	if paused, refused, since := r.Paused(); !paused || refused || since.IsZero() {
		t.Fatalf("during the outage Paused() = %v, %v, %v; want paused, not refused, since the first failed probe", paused, refused, since)
	}
	if c := e.confirmed(); c > held || e.count(0) != 200 || e.count(2) != 0 {
		t.Fatalf("during the outage: confirmed %d past the unpublished transaction (%d): %v, pending %d, dead %d",
			c, held, c > held, e.count(0), e.count(2))
	}
	e.nats.Start()
	got := e.read(201)
	if len(got) != 201 {
		t.Fatalf("stream holds %d, want 201", len(got))
	}
	e.waitFor("rows marked", 30*time.Second, func() bool { return e.count(0) == 0 })
	e.waitFor("confirmed moves on", 30*time.Second, func() bool { return e.confirmed() > held })
	if paused, _, _ := r.Paused(); paused {
		t.Fatal("Paused() after the broker came back: still paused")
	}
}

// A relay whose stream restarts during an outage drops its window, and
// then holds no event to probe the broker with. It must take one anyway —
// from the stream, or here, with nothing new committed, from the due
// sweep — or the breaker never learns that the broker is back: before
// the fix the delayed event below stayed pending for good.
func TestReconnectDuringOutageStillProbes(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(), e.publisher())
	e.nats.Shutdown()
	d := msg("k")
	d.NotBefore = time.Now().Add(300 * time.Millisecond)
	e.insert(false, d)
	e.waitFor("the due sweep finds the broker down", 30*time.Second, func() bool { return r.Stats().Outages > 1 })
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND backend_type = 'walsender'`, e.name+"_relay").Scan(&n); err != nil || n != 1 {
		t.Fatalf("end the relay's replication session: %d ended, %v", n, err)
	}
	e.waitFor("the stream restarted", 30*time.Second, func() bool { return r.Stats().Restarts > 0 && r.Active() })
	e.nats.Start()
	if got := ids(t, e.read(1)); got[0] != d.ID {
		t.Fatalf("published %v, want the delayed event %v", got, d.ID)
	}
	e.waitFor("its row done", 30*time.Second, func() bool { return e.count(0) == 0 })
}

// On an idle outbox the heartbeats keep the slot's confirmed position up
// with the server's, so the slot pins no WAL; Status says so.
func TestHeartbeatAdvancesIdleSlot(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(), e.publisher())
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE `+e.name+`.other (x int)`); err != nil {
		t.Fatal(err)
	}
	// WAL the outbox has no part in.
	if _, err := e.pool.Exec(ctx, `INSERT INTO `+e.name+`.other SELECT generate_series(1, 20000)`); err != nil {
		t.Fatal(err)
	}
	target := e.currentLSN()
	e.waitFor("the confirmed position passes the other table's writes", 30*time.Second, func() bool { return e.confirmed() >= target })
	s, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Active || s.WALStatus == "" || s.Lag > 1<<20 {
		t.Errorf("status %+v: want active, a wal_status, a small lag", s)
	}
	if r.Stats().Published != 0 {
		t.Error("a heartbeat was published")
	}
}

// In insert-and-delete mode the table stays empty, the events are
// published from the log, a dead one's row is written back dead, and a
// delayed one is held in the table until due.
func TestInsertDeleteMode(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Mode, cfg.KeyedFailure, cfg.MaxAttempts = pgcdc.InsertDelete, relay.DeadLetterKey, 2
	pub := newFailing(e.publisher())
	e.start(cfg, pub)
	ctx := context.Background()
	msgs := []outbox.Message{msg("a"), msg("a"), msg("b"), msg("")}
	pub.set(msgs[3].ID, errBroker)
	delayed := msg("c")
	delayed.NotBefore = time.Now().Add(time.Second).UTC().Truncate(time.Microsecond)
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.InsertTx(ctx, tx, append(msgs, delayed)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+e.table); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.read(3)
	e.waitFor("the dead row written back", 30*time.Second, func() bool { return e.count(2) == 1 })
	got := e.read(4)
	for _, m := range got {
		if m.Headers().Get(outboxnats.HeaderMsgID) == delayed.ID.String() {
			if md, _ := m.Metadata(); md != nil && md.Timestamp.Before(delayed.NotBefore) {
				t.Errorf("the delayed event was published at %v, before its time %v", md.Timestamp, delayed.NotBefore)
			}
		}
	}
	e.waitFor("the held row gone once published", 30*time.Second, func() bool { return e.count(0) == 0 })
}

// A delayed event is not published before its time, survives a restart of
// the relay (its row stays pending), and is published when due.
func TestDelayedEventSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	r := e.start(e.config(), e.publisher())
	now := msg("k")
	later := msg("k")
	later.NotBefore = time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Microsecond)
	e.insert(false, later, now)
	e.read(1)
	e.waitFor("the stream confirms past both", 30*time.Second, func() bool { return r.Stats().Delayed == 1 && e.count(0) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	e.start(e.config(), e.publisher())
	got := e.read(2)
	if len(got) != 2 {
		t.Fatalf("stream holds %d, want 2", len(got))
	}
	md, err := got[1].Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if id := got[1].Headers().Get(outboxnats.HeaderMsgID); id != later.ID.String() {
		t.Fatalf("second message %s, want the delayed one", id)
	}
	if md.Timestamp.Before(later.NotBefore) {
		t.Errorf("published at %v, before its time %v", md.Timestamp, later.NotBefore)
	}
	e.waitFor("its row deleted", 30*time.Second, func() bool { return e.count(0) == 0 })
}

// A second relay on the same slot waits as a hot standby and takes over
// within seconds when the first dies.
func TestHotStandbyTakesOver(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := pgcdc.New(e.config(), e.publisher())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the first streams", 30*time.Second, first.Active)
	second, err := pgcdc.New(e.config(), e.publisher())
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = second.Stop(sctx)
	})
	e.insert(false, msg("k"))
	e.read(1)
	if second.Active() {
		t.Fatal("two relays stream from one slot")
	}
	// The first dies (its connections close, as a killed process's would).
	cancel()
	died := time.Now()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = first.Stop(sctx)
	e.waitFor("the standby takes over", 30*time.Second, second.Active)
	t.Logf("takeover %v after the first relay died (StandbyRetry %v)", time.Since(died).Round(time.Millisecond), e.config().StandbyRetry)
	m := msg("k")
	e.insert(false, m)
	got := ids(t, e.read(2))
	if len(got) != 2 || got[1] != m.ID {
		t.Fatalf("after the takeover the stream holds %v", got)
	}
}

var _ = uuid.Nil
