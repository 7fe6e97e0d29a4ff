package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// bundle is what a relay test needs: its own schema and its own stream.
type bundle struct {
	pool                    *pgxpool.Pool
	cfg                     *postgres.Config
	db                      *postgres.DB
	store                   *postgres.Store
	ob                      *outbox.Outbox[pgx.Tx]
	natsURL, prefix, stream string
	js                      jetstream.JetStream
}

func setup(t testing.TB) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	cfg := &postgres.Config{Schema: pgtest.Schema(t, pool)}
	db, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Store().Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	return &bundle{pool: pool, cfg: cfg, db: db, store: db.Store(), ob: outbox.New(db, nil),
		natsURL: natstest.URL(), prefix: prefix, stream: stream, js: natstest.JetStream(t, nc)}
}

func (b *bundle) publisher(t testing.TB) *natspub.Publisher {
	t.Helper()
	p, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: b.natsURL, SubjectPrefix: b.prefix, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// start runs a relay until the test ends, stopping it gracefully.
func start(t *testing.T, s *postgres.Store, p publishers.Publisher, cfg *relay.Config) *relay.Relay {
	t.Helper()
	if cfg == nil {
		cfg = &relay.Config{}
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	r, err := relay.New(s, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return r
}

// enqueue commits (or rolls back) msgs in one transaction.
func (b *bundle) enqueue(t testing.TB, commit bool, msgs ...outbox.Message) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ob.Enqueue(ctx, tx, msgs...); err != nil {
		t.Fatal(err)
	}
	if commit {
		err = tx.Commit(ctx)
	} else {
		err = tx.Rollback(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func events(topic string, n int) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = outbox.Message{ID: outbox.NewID(), Topic: topic, Key: fmt.Sprintf("k%d", i%1000),
			Type: "Tested", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	return out
}

// arrivedIDs reads the stream until it holds n messages and returns their IDs.
func (b *bundle) arrivedIDs(t testing.TB, n int) []string {
	t.Helper()
	msgs := natstest.WaitForCount(t, b.js, b.stream, n, 60*time.Second)
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.Headers().Get("Nats-Msg-Id")
	}
	return ids
}

// streamCount is how many messages the stream holds now.
func (b *bundle) streamCount(t testing.TB) uint64 {
	t.Helper()
	s, err := b.js.Stream(context.Background(), b.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
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

// row is an outbox row's delivery state.
type row struct {
	status, attempts int
	lastError        string
}

func (b *bundle) rows(t testing.TB) map[uuid.UUID]row {
	t.Helper()
	rs, err := b.pool.Query(context.Background(),
		`SELECT id, status, attempts, coalesce(last_error, '') FROM "`+b.cfg.Schema+`".messages`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]row{}
	var id uuid.UUID
	var r row
	_, err = pgx.ForEachRow(rs, []any{&id, &r.status, &r.attempts, &r.lastError}, func() error {
		out[id] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommitArrivesRollbackNever(t *testing.T) {
	b := setup(t)
	committed := events("orders", 50)
	rolledBack := events("orders", 50)
	b.enqueue(t, false, rolledBack[:25]...)
	b.enqueue(t, true, committed...)
	b.enqueue(t, false, rolledBack[25:]...)
	r := start(t, b.store, b.publisher(t), nil)

	got := b.arrivedIDs(t, len(committed))
	want := map[string]bool{}
	for _, m := range committed {
		want[m.ID.String()] = true
	}
	for _, id := range got {
		if !want[id] {
			t.Fatalf("event %s arrived but was never committed", id)
		}
		delete(want, id)
	}
	if len(want) != 0 {
		t.Fatalf("%d committed events did not arrive", len(want))
	}
	waitFor(t, "the table to empty", 10*time.Second, func() bool { return len(b.rows(t)) == 0 })
	// The relay found nothing else to publish: the stream holds exactly the
	// committed events.
	if n := b.streamCount(t); n != uint64(len(committed)) {
		t.Fatalf("stream holds %d messages, want %d", n, len(committed))
	}
	if st := r.Stats(); st.Published != int64(len(committed)) {
		t.Fatalf("relay published %d, want %d", st.Published, len(committed))
	}
}

func TestHeadersAndMetadataArrive(t *testing.T) {
	b := setup(t)
	m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-7", Type: "OrderConfirmed",
		Payload: []byte(`{"order":7}`), Headers: map[string]string{"Correlation-Id": "c-7"}}
	b.enqueue(t, true, m)
	start(t, b.store, b.publisher(t), nil)
	got := natstest.WaitForCount(t, b.js, b.stream, 1, 30*time.Second)[0]
	h := got.Headers()
	if got.Subject() != b.prefix+".orders" || string(got.Data()) != `{"order":7}` ||
		h.Get("Nats-Msg-Id") != m.ID.String() || h.Get("Correlation-Id") != "c-7" ||
		h.Get("Outbox-Key") != "order-7" || h.Get("Outbox-Type") != "OrderConfirmed" {
		t.Fatalf("arrived: subject %q data %q headers %v", got.Subject(), got.Data(), h)
	}
}

func TestFourRelaysNoDoublePublish(t *testing.T) {
	b := setup(t)
	const n = 20000
	for i := 0; i < n; i += 5000 {
		b.enqueue(t, true, events("bulk", 5000)...)
	}
	var published atomic.Int64
	hooks := relay.Hooks{AfterPublish: func(msgs []outbox.Message, errs []error) {
		published.Add(int64(len(msgs)))
	}}
	var relays []*relay.Relay
	for range 4 {
		// Each relay has its own pool and connection to the broker, as
		// separate processes would.
		pool := pgtest.Pool(t)
		db, _ := postgres.New(pool, b.cfg)
		relays = append(relays, start(t, db.Store(), b.publisher(t), &relay.Config{BatchSize: 500, Hooks: hooks}))
	}
	ids := b.arrivedIDs(t, n)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("event %s arrived twice", id)
		}
		seen[id] = true
	}
	waitFor(t, "the table to empty", 30*time.Second, func() bool { return len(b.rows(t)) == 0 })
	if p := published.Load(); p != n {
		t.Fatalf("%d publishes for %d events: a double publish in normal operation", p, n)
	}
	var total int64
	for i, r := range relays {
		st := r.Stats()
		t.Logf("relay %d published %d in %d batches", i, st.Published, st.Batches)
		total += st.Published
	}
	if total != n {
		t.Fatalf("relays published %d in all, want %d", total, n)
	}
}

// rejecting wraps a real publisher and fails the messages whose IDs it is
// told to, the way a broker refuses a poison message; with once, only
// their first attempt, as a passing hiccup would.
type rejecting struct {
	publishers.Publisher
	mu     sync.Mutex
	reject map[uuid.UUID]error
	once   bool
}

func (p *rejecting) Publish(ctx context.Context, msgs []outbox.Message) []error {
	p.mu.Lock()
	var pass []outbox.Message
	var idx []int
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if err, ok := p.reject[m.ID]; ok {
			errs[i] = err
			if p.once {
				delete(p.reject, m.ID)
			}
			continue
		}
		pass = append(pass, m)
		idx = append(idx, i)
	}
	p.mu.Unlock()
	for j, err := range p.Publisher.Publish(ctx, pass) {
		errs[idx[j]] = err
	}
	return errs
}

func TestPoisonEventRetriedThenDead(t *testing.T) {
	b := setup(t)
	evs := events("orders", 20)
	poison, permanent := evs[3], evs[11]
	pub := &rejecting{Publisher: b.publisher(t), reject: map[uuid.UUID]error{
		poison.ID:    errors.New("consumer schema check failed"),
		permanent.ID: publishers.Permanent(errors.New("message too large")),
	}}
	b.enqueue(t, true, evs...)
	start(t, b.store, pub, &relay.Config{MaxAttempts: 3, KeyedFailure: relay.DeadLetterKey,
		RetryBackoff: outbox.Backoff{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}})

	b.arrivedIDs(t, 18)
	waitFor(t, "the poison event to be dead", 20*time.Second, func() bool {
		return b.rows(t)[poison.ID].status == 2
	})
	waitFor(t, "the published events to be deleted", 10*time.Second, func() bool { return len(b.rows(t)) == 2 })
	rows := b.rows(t)
	if r := rows[poison.ID]; r.attempts != 3 || r.lastError != "consumer schema check failed" {
		t.Fatalf("poison row: %+v, want dead after 3 attempts with its error", r)
	}
	if r := rows[permanent.ID]; r.status != 2 || r.attempts != 1 || r.lastError == "" {
		t.Fatalf("permanently rejected row: %+v, want dead after 1 attempt", r)
	}
	dead, err := b.store.Dead(context.Background(), stores.DeadParams{})
	if err != nil || len(dead) != 2 {
		t.Fatalf("dead list: %v (err %v)", dead, err)
	}

	// Replayed, and the broker now accepts it: it is published.
	pub.mu.Lock()
	delete(pub.reject, poison.ID)
	pub.mu.Unlock()
	if n, err := b.store.Replay(context.Background(), stores.ReplayParams{IDs: []uuid.UUID{poison.ID}, Now: time.Now()}); err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	ids := b.arrivedIDs(t, 19)
	if ids[18] != poison.ID.String() {
		t.Fatalf("after replay the last arrival is %s, want the replayed %s", ids[18], poison.ID)
	}
}

func TestDelayedEventWaitsForItsTime(t *testing.T) {
	b := setup(t)
	clock := clocktest.New(time.Now())
	b.ob = outbox.New(b.db, &outbox.Config{Clock: clock})
	now := events("orders", 1)[0]
	later := events("orders", 2)[1] // another key: a delayed head holds its own key back
	later.NotBefore = clock.Now().Add(time.Hour)
	b.enqueue(t, true, later, now)
	r := start(t, b.store, b.publisher(t), &relay.Config{Clock: clock})

	// The undelayed event, committed with the delayed one, arrives: the
	// relay has claimed while both were visible, and left the delayed one.
	if ids := b.arrivedIDs(t, 1); ids[0] != now.ID.String() {
		t.Fatalf("first arrival %s, want the undelayed event", ids[0])
	}
	clock.Advance(59 * time.Minute)
	claims := r.Stats().Claims
	waitFor(t, "three claims after the clock moved", 10*time.Second, func() bool {
		r.Wake()
		return r.Stats().Claims >= claims+3
	})
	if n := b.streamCount(t); n != 1 {
		t.Fatalf("the delayed event was published before its time (%d messages)", n)
	}
	clock.Advance(time.Minute)
	r.Wake()
	if ids := b.arrivedIDs(t, 2); ids[1] != later.ID.String() {
		t.Fatalf("second arrival %s, want the delayed event", ids[1])
	}
}

// Stop lets an in-flight batch finish publishing and be marked.
func TestStopFinishesInFlightBatch(t *testing.T) {
	b := setup(t)
	ev := events("orders", 1)[0]
	b.enqueue(t, true, ev)
	published := make(chan struct{})
	release := make(chan struct{})
	r, err := relay.New(b.store, b.publisher(t), &relay.Config{PollInterval: 50 * time.Millisecond,
		Hooks: relay.Hooks{AfterPublish: func([]outbox.Message, []error) {
			close(published)
			<-release
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-published
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- r.Stop(ctx)
	}()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a batch was in flight", err)
	case <-time.After(100 * time.Millisecond): // a window for a wrong early return
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if rows := b.rows(t); len(rows) != 0 {
		t.Fatalf("the in-flight batch was not marked before Stop returned: %v", rows)
	}
}

// In ordered mode a failing event holds back its own key only: the other
// keys drain while it retries, its key's later events wait, and once it is
// dead-lettered by hand they follow in order.
func TestPoisonBlocksOnlyItsKey(t *testing.T) {
	b := setup(t)
	var a, other []outbox.Message
	for i := range 5 {
		a = append(a, outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "A", Payload: []byte(fmt.Sprint(i))})
	}
	for i := range 50 {
		other = append(other, outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "B", Payload: []byte(fmt.Sprint(i))})
	}
	pub := &rejecting{Publisher: b.publisher(t), reject: map[uuid.UUID]error{
		a[0].ID: publishers.Permanent(errors.New("poison")),
	}}
	b.enqueue(t, true, a...)
	b.enqueue(t, true, other...)
	r := start(t, b.store, pub, &relay.Config{
		RetryBackoff: outbox.Backoff{Min: 10 * time.Millisecond, Max: 20 * time.Millisecond}})

	ids := b.arrivedIDs(t, 50)
	for i, m := range other {
		if ids[i] != m.ID.String() {
			t.Fatalf("key B arrival %d is %s, want %s: B out of order or held back", i, ids[i], m.ID)
		}
	}
	// A's head retries (a permanent error blocks too, by default) while
	// A's later events wait.
	waitFor(t, "A's head to be retried several times", 20*time.Second, func() bool {
		return b.rows(t)[a[0].ID].attempts >= 3
	})
	if n := b.streamCount(t); n != 50 {
		t.Fatalf("stream holds %d, want B's 50 only: A's later events overtook its failing head", n)
	}
	waitFor(t, "B's events to be marked", 10*time.Second, func() bool { return len(b.rows(t)) == 5 })
	if rows := b.rows(t); rows[a[0].ID].status != 0 || len(rows) != 5 {
		t.Fatalf("A's head should stay pending with A's 4 others behind it: %+v", rows)
	}

	if n, err := b.store.DeadLetter(context.Background(), stores.DeadLetterParams{IDs: []uuid.UUID{a[0].ID}, Reason: "by hand"}); err != nil || n != 1 {
		t.Fatalf("dead-letter: %d, %v", n, err)
	}
	r.Wake()
	ids = b.arrivedIDs(t, 54)
	for i, m := range a[1:] {
		if ids[50+i] != m.ID.String() {
			t.Fatalf("after the dead-letter, arrival %d is %s, want A's event %d", 50+i, ids[50+i], i+1)
		}
	}
}
