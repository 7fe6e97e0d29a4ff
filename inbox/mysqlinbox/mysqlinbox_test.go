package mysqlinbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/mysqlinbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/mysqltest"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/mysql"
)

// bundle is a test's own database with the inbox table and an effects
// table. effects has no unique key, so an effect applied twice shows; seq
// records the order effects were applied in.
type bundle struct {
	db    *sql.DB
	drv   *mysqlinbox.Driver
	clock *clocktest.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := mysqltest.Open(t)
	drv, err := mysqlinbox.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE effects (
		seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, msg_id BINARY(16) NOT NULL, note VARCHAR(64) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &bundle{db: db, drv: drv, clock: clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func (b *bundle) effects(t testing.TB, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow(`SELECT COUNT(*) FROM effects WHERE msg_id = ?`, id[:]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bundle) records(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow("SELECT COUNT(*) FROM `outbox_inbox`").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func msg() inbox.Message {
	return inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", Type: "OrderConfirmed", Payload: []byte(`{}`)}
}

func effect(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (msg_id, note) VALUES (?, 'x')`, m.ID[:])
	return err
}

func nop(context.Context, *sql.Tx, inbox.Message) error { return nil }

// The same message delivered three times has one effect, and its record
// holds the topic and the clock's time.
func TestDuplicateHasOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, &inbox.Config{Clock: b.clock})
	m := msg()
	var outcomes []inbox.Outcome
	for range 3 {
		o, err := in.Handle(context.Background(), m, effect)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
	}
	if fmt.Sprint(outcomes) != "[handled duplicate duplicate]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	var topic, received string
	err := b.db.QueryRow("SELECT topic, CAST(received_at AS CHAR) FROM outbox_inbox WHERE id = ?", m.ID[:]).Scan(&topic, &received)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "orders" || received != "2026-01-02 03:04:05.000000" {
		t.Fatalf("record (%q, %s), want (orders, the clock's now)", topic, received)
	}
}

// RecordTx in the caller's own transaction: a duplicate is reported as
// such, and the transaction goes on (InnoDB rolls back only the failed
// INSERT).
func TestRecordTxLeavesTheTransactionUsable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := inbox.New(b.drv, nil)
	m := msg()
	if _, err := in.Handle(ctx, m, nop); err != nil {
		t.Fatal(err)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if inserted, err := in.RecordTx(ctx, tx, m); err != nil || inserted {
		t.Fatalf("RecordTx of a recorded message = %v, %v; want false, nil", inserted, err)
	}
	other := msg()
	if inserted, err := in.RecordTx(ctx, tx, other); err != nil || !inserted {
		t.Fatalf("RecordTx of a new message after a duplicate = %v, %v; want true, nil", inserted, err)
	}
	if err := effect(ctx, tx, other); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := b.effects(t, other.ID); n != 1 || b.records(t) != 2 {
		t.Fatalf("%d effects, %d records; want 1 and 2", n, b.records(t))
	}
	if _, err := b.drv.RecordTx(ctx, nil, inbox.Record{ID: outbox.NewID()}); err == nil {
		t.Fatal("RecordTx with a nil transaction succeeded")
	}
}

// A failing handler rolls back its effect and the record, so the next
// delivery runs it again; a panicking one too.
func TestFailureRecordsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, nil)
	m := msg()
	handle := func(fail error, panics bool) (inbox.Outcome, error) {
		return in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			if err := effect(ctx, tx, m); err != nil {
				return err
			}
			if panics {
				panic("handler panics")
			}
			return fail
		})
	}
	boom := errors.New("boom")
	if _, err := handle(boom, false); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the handler's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler's panic did not propagate")
			}
		}()
		_, _ = handle(nil, true)
	}()
	if n := b.effects(t, m.ID); n != 0 || b.records(t) != 0 {
		t.Fatalf("%d effects, %d records after failures, want none", n, b.records(t))
	}
	if o, err := handle(nil, false); err != nil || o != inbox.Handled {
		t.Fatalf("Handle after failures = %v, %v; want handled", o, err)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// A handler's chained events (the MySQL outbox, stores/mysql) commit with
// its effect and its record, and not at all when it fails.
func TestChainedEventsCommitWithTheRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if err := mysql.Migrate(ctx, b.db, nil); err != nil {
		t.Fatal(err)
	}
	od, err := mysql.NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(od, nil)
	in := inbox.New(b.drv, nil)
	handle := func(m inbox.Message, fail bool) error {
		_, err := in.Handle(ctx, m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			if err := ob.Enqueue(ctx, tx, outbox.Message{Topic: "next", Key: m.Key, Payload: []byte(m.ID.String())}); err != nil {
				return err
			}
			if fail {
				return errors.New("provider failed")
			}
			return nil
		})
		return err
	}
	ok, bad := msg(), msg()
	if err := handle(bad, true); err == nil {
		t.Fatal("the failing handler succeeded")
	}
	for range 2 {
		if err := handle(ok, false); err != nil {
			t.Fatal(err)
		}
	}
	payloads := queryStrings(t, b.db, `SELECT CAST(payload AS CHAR) FROM outbox_messages`)
	if len(payloads) != 1 || payloads[0] != ok.ID.String() {
		t.Fatalf("outbox holds %v, want one event chained from %s", payloads, ok.ID)
	}
}

// A zombie relay (stalled past its claim, then awake) can publish an old
// event again after newer events of its key. Through the inbox the
// consumer's effects stay in per-key order: the late copy is a duplicate.
func TestLateDuplicateKeepsPerKeyOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, &inbox.Config{Clock: b.clock})
	e := make([]inbox.Message, 3)
	for i := range e {
		e[i] = inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "order-1", Payload: []byte(fmt.Sprint(i + 1))}
	}
	// What the broker delivered: 1, 2, then the zombie's late copy of 1, then 3.
	var outcomes []inbox.Outcome
	for _, m := range []inbox.Message{e[0], e[1], e[0], e[2]} {
		o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (msg_id, note) VALUES (?, ?)`, m.ID[:], string(m.Payload))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
	}
	if fmt.Sprint(outcomes) != "[handled handled duplicate handled]" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if notes := queryStrings(t, b.db, `SELECT note FROM effects ORDER BY seq`); fmt.Sprint(notes) != "[1 2 3]" {
		t.Fatalf("effects in order %v, want [1 2 3]", notes)
	}
}

// A topic the column cannot take as it is (invalid UTF-8, longer than
// TEXT) is stored cleaned up rather than failing the message.
func TestOddTopicsAreStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, nil)
	for _, topic := range []string{"", "a\xffb", strings.Repeat("é", 40000)} {
		m := msg()
		m.Topic = topic
		if o, err := in.Handle(context.Background(), m, nop); err != nil || o != inbox.Handled {
			t.Fatalf("Handle with topic of %d bytes = %v, %v; want handled", len(topic), o, err)
		}
	}
	if got := queryStrings(t, b.db, "SELECT topic FROM outbox_inbox WHERE topic LIKE 'a%b'"); fmt.Sprint(got) != "[a\uFFFDb]" {
		t.Fatalf("topics %q, want [a\uFFFDb]", got)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t) // migrated once
	for range 2 {
		if err := b.drv.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// The plain SQL file for goose, golang-migrate and atlas users is the
// template rendered with the defaults.
func TestPlainSQLFileMatches(t *testing.T) {
	t.Parallel()
	want, err := mysqlinbox.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("migrations/001_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("migrations/001_inbox.up.sql is stale; regenerate it from mysqlinbox.SchemaSQL(nil)")
	}
}

func TestOtherTableName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	drv, err := mysqlinbox.New(b.db, &mysqlinbox.Config{Table: "billing_inbox"})
	if err != nil {
		t.Fatal(err)
	}
	if drv.Config().Table != "billing_inbox" {
		t.Fatalf("Config().Table = %q", drv.Config().Table)
	}
	if err := drv.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := msg()
	// The same ID in two consumers' tables: each handles it once.
	var outcomes []inbox.Outcome
	for _, d := range []*mysqlinbox.Driver{b.drv, drv, drv} {
		o, err := inbox.New(d, nil).Handle(context.Background(), m, effect)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
	}
	if fmt.Sprint(outcomes) != "[handled handled duplicate]" {
		t.Fatalf("outcomes %v, want [handled handled duplicate]", outcomes)
	}
	if n := b.effects(t, m.ID); n != 2 {
		t.Fatalf("%d effects, want 2 (one per consumer)", n)
	}
}

func TestBadConfig(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 65)
	for _, cfg := range []mysqlinbox.Config{{Table: "a`b"}, {Table: "x; DROP TABLE y"}, {Table: "1abc"}, {Table: long}} {
		if _, err := mysqlinbox.New(nil, &cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
		if _, err := mysqlinbox.SchemaSQL(&cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
	}
	if _, err := mysqlinbox.New(nil, nil); err == nil {
		t.Error("New(nil db) succeeded")
	}
}

func TestSchemaMissingAndInvalidMessage(t *testing.T) {
	t.Parallel()
	d, err := mysqlinbox.New(mysqltest.Open(t), nil) // never migrated
	if err != nil {
		t.Fatal(err)
	}
	in := inbox.New(d, nil)
	if _, err := in.Handle(context.Background(), msg(), nop); !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("Handle without the table = %v, want ErrSchemaMissing", err)
	}
	if _, err := in.Purge(context.Background(), time.Now(), 10); !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("Purge without the table = %v, want ErrSchemaMissing", err)
	}
	_, err = in.Handle(context.Background(), inbox.Message{Topic: "x"}, nop)
	if !errors.Is(err, inbox.ErrInvalidMessage) || !inbox.IsPermanent(err) {
		t.Fatalf("Handle without an ID = %v, want a permanent ErrInvalidMessage", err)
	}
}

func queryStrings(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
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
