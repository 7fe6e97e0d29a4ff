package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/ui"
)

// waitFor bounds every wait on a condition: generous, for a loaded
// machine; a wait ends as soon as its condition holds.
const waitFor = 2 * time.Minute

// bundle is what a test needs: its own schema in the shared PostgreSQL,
// the store on it, and a dashboard of that store served on 127.0.0.1.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	db     *postgres.DB
	store  stores.Store
	ob     *outbox.Outbox[pgx.Tx]
	dash   *ui.Dashboard
	srv    *httptest.Server
}

func setup(t *testing.T, opts *ui.Options) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	db, err := postgres.New(pool, &postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if opts == nil {
		opts = &ui.Options{}
	}
	opts.Store = db.Store()
	if opts.Title == "" {
		opts.Title = "postgres://127.0.0.1/test " + schema
	}
	d, err := ui.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return &bundle{pool: pool, schema: schema, db: db, store: db.Store(), ob: outbox.New(db, nil), dash: d, srv: srv}
}

// enqueue commits msgs in one transaction and returns them with their IDs.
func (b *bundle) enqueue(t *testing.T, msgs ...outbox.Message) []outbox.Message {
	t.Helper()
	ctx := context.Background()
	for i := range msgs {
		if msgs[i].ID == [16]byte{} {
			msgs[i].ID = outbox.NewID()
		}
	}
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.ob.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// count counts the test's rows matching where.
func (b *bundle) count(t *testing.T, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM %q.messages WHERE `+where, b.schema)
	if err := b.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// seeded are the events seed wrote.
type seeded struct {
	dead    []outbox.Message // two dead events of topic payments
	head    outbox.Message   // the failing head of key blockedKey
	behind  outbox.Message   // the event its key holds back
	pending []outbox.Message // five pending events of topic orders
}

const blockedKey = "customer-7"

// seed writes pending, blocked and dead events, as a relay leaves them:
// two events that failed for good, a keyed head that failed once and
// waits an hour for its retry (blocking its key's next event), and five
// pending events.
func (b *bundle) seed(t *testing.T) seeded {
	t.Helper()
	ctx := context.Background()
	var s seeded
	first := b.enqueue(t,
		outbox.Message{Topic: "payments", Type: "PaymentCaptured", Payload: []byte(`{"n":1}`)},
		outbox.Message{Topic: "payments", Type: "PaymentCaptured", Payload: []byte(`{"n":2}`)},
		outbox.Message{Topic: "payments", Key: blockedKey, Type: "PaymentRefunded", Payload: []byte(`{"n":3}`)})
	s.dead, s.head = first[:2], first[2]
	now := time.Now()
	batch, err := b.store.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(batch.Records()); n != 3 {
		t.Fatalf("claimed %d events, want the 3 just enqueued", n)
	}
	err = batch.Complete(ctx, stores.Outcome{Now: now,
		Dead: []stores.Failure{
			{ID: s.dead[0].ID, Err: "nats: maximum payload exceeded"},
			{ID: s.dead[1].ID, Err: "nats: permissions violation for publish to outbox.payments"},
		},
		Retry: []stores.Failure{{ID: s.head.ID, Err: "nats: timeout", NextAttempt: now.Add(time.Hour)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.behind = b.enqueue(t, outbox.Message{Topic: "payments", Key: blockedKey, Type: "PaymentRefunded", Payload: []byte(`{"n":4}`)})[0]
	for i := range 5 {
		s.pending = append(s.pending, b.enqueue(t, outbox.Message{Topic: "orders", Type: "OrderConfirmed",
			Payload: fmt.Appendf(nil, `{"order":%d}`, i)})[0])
	}
	return s
}

// client is an HTTP client that does not follow redirects.
func client() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}
