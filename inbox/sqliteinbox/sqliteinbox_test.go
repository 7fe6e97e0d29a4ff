package sqliteinbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/sqliteinbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/sqlite"
)

type bench struct {
	db    *sql.DB
	drv   *sqliteinbox.Driver
	clock *clocktest.Clock
}

// setup opens a fresh database in a temporary directory, migrates the inbox
// and creates an effects table without a unique key, so that an effect
// applied twice shows.
func setup(t *testing.T) *bench {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	drv, err := sqliteinbox.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE effects (id BLOB NOT NULL, what TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &bench{db: db, drv: drv, clock: clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func (b *bench) effects(t *testing.T, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow(`SELECT count(*) FROM effects WHERE id = ?`, id[:]).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bench) records(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.db.QueryRow(`SELECT count(*) FROM outbox_inbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func msg() inbox.Message { return inbox.Message{ID: outbox.NewID(), Topic: "orders"} }

func effect(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effects VALUES (?, 'x')`, m.ID[:])
	return err
}

// The same message delivered three times has one effect.
func TestDuplicateDeliveredThreeTimesOneEffect(t *testing.T) {
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
	var received int64
	if err := b.db.QueryRow(`SELECT received_at FROM outbox_inbox WHERE id = ?`, m.ID[:]).Scan(&received); err != nil {
		t.Fatal(err)
	}
	if got := time.UnixMicro(received).UTC(); !got.Equal(b.clock.Now()) {
		t.Fatalf("received_at %v, want the clock's %v", got, b.clock.Now())
	}
}

// A failing handler rolls back its effect and the record, so the next
// delivery runs it again; a panicking one too.
func TestFailureRecordsNothing(t *testing.T) {
	b := setup(t)
	in := inbox.New(b.drv, nil)
	m := msg()
	boom := errors.New("boom")
	if _, err := in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		if err := effect(ctx, tx, m); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the handler's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the handler's panic did not propagate")
			}
		}()
		_, _ = in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			if err := effect(ctx, tx, m); err != nil {
				return err
			}
			panic("handler panics")
		})
	}()
	if n := b.effects(t, m.ID); n != 0 {
		t.Fatalf("%d effects after failures, want 0", n)
	}
	o, err := in.Handle(context.Background(), m, effect)
	if err != nil || o != inbox.Handled {
		t.Fatalf("Handle after failures = %v, %v; want handled", o, err)
	}
	if n := b.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// A second delivery while the first is still in its transaction waits for
// the first (SQLite's single writer, taken at BEGIN IMMEDIATE): it is a
// duplicate when the first commits, and runs the handler when the first
// rolls back.
func TestConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	for _, firstFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("first fails %v", firstFails), func(t *testing.T) {
			b := setup(t)
			in := inbox.New(b.drv, nil)
			m := msg()
			inside, release := make(chan struct{}), make(chan struct{})
			type result struct {
				o   inbox.Outcome
				err error
			}
			first, second := make(chan result, 1), make(chan result, 1)
			secondStarted := make(chan struct{})
			go func() {
				o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
					if err := effect(ctx, tx, m); err != nil {
						return err
					}
					close(inside)
					<-release
					if firstFails {
						return errors.New("first fails")
					}
					return nil
				})
				first <- result{o, err}
			}()
			<-inside
			go func() {
				close(secondStarted)
				o, err := in.Handle(context.Background(), m, effect)
				second <- result{o, err}
			}()
			<-secondStarted
			// The second cannot finish while the first holds the write lock.
			select {
			case r := <-second:
				t.Fatalf("the second delivery returned %v, %v before the first ended", r.o, r.err)
			case <-time.After(200 * time.Millisecond):
			}
			close(release)
			r1, r2 := <-first, <-second
			if firstFails {
				if r1.err == nil || r2.err != nil || r2.o != inbox.Handled {
					t.Fatalf("first %v, %v; second %v, %v; want failure, then handled", r1.o, r1.err, r2.o, r2.err)
				}
			} else if r1.err != nil || r1.o != inbox.Handled || r2.err != nil || r2.o != inbox.Duplicate {
				t.Fatalf("first %v, %v; second %v, %v; want handled, then duplicate", r1.o, r1.err, r2.o, r2.err)
			}
			if n := b.effects(t, m.ID); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// Many deliveries of the same messages at once: each message's effect once.
func TestConcurrentDeliveries(t *testing.T) {
	b := setup(t)
	in := inbox.New(b.drv, nil)
	msgs := make([]inbox.Message, 20)
	for i := range msgs {
		msgs[i] = msg()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(msgs))
	for range 8 {
		wg.Go(func() {
			for _, m := range msgs {
				if _, err := in.Handle(context.Background(), m, effect); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if n := b.effects(t, m.ID); n != 1 {
			t.Fatalf("message %s: %d effects, want 1", m.ID, n)
		}
	}
}

// A handler's chained events (the SQLite outbox) commit with its effect and
// its record, and not at all when it fails.
func TestChainedEventsCommitWithTheRecord(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	store, err := sqlite.New(b.db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	od, err := sqlite.NewDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	ob := outbox.New(od, nil)
	in := inbox.New(b.drv, nil)
	handle := func(m inbox.Message, fail bool) error {
		_, err := in.Handle(ctx, m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			if err := ob.Enqueue(ctx, tx, outbox.Message{Topic: "next", Payload: []byte(m.ID.String())}); err != nil {
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
	var payloads []string
	rows, err := b.db.QueryContext(ctx, `SELECT CAST(payload AS TEXT) FROM outbox_messages`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(payloads) != 1 || payloads[0] != ok.ID.String() {
		t.Fatalf("outbox holds %v, want one event chained from %s", payloads, ok.ID)
	}
}

func TestPurge(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	in := inbox.New(b.drv, &inbox.Config{Clock: b.clock, Retention: 24 * time.Hour, PurgeBatch: 2})
	nop := func(context.Context, *sql.Tx, inbox.Message) error { return nil }
	var ids []inbox.Message
	for range 5 { // received at t0, t0+1h, …, t0+4h
		m := msg()
		ids = append(ids, m)
		if _, err := in.Handle(ctx, m, nop); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Hour)
	}
	t0 := b.clock.Now().Add(-5 * time.Hour)
	n, err := in.Purge(ctx, t0.Add(90*time.Minute), 10) // t0 and t0+1h
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2", n, err)
	}
	if n := b.records(t); n != 3 {
		t.Fatalf("%d records left, want 3", n)
	}
	// Purged: a duplicate of a purged message is no longer caught.
	if o, err := in.Handle(ctx, ids[0], nop); err != nil || o != inbox.Handled {
		t.Fatalf("redelivery after purge = %v, %v; want handled (the trade-off of the window)", o, err)
	}
	if o, err := in.Handle(ctx, ids[4], nop); err != nil || o != inbox.Duplicate {
		t.Fatalf("redelivery within the window = %v, %v; want duplicate", o, err)
	}
	// 28h30m after t0: everything older than 24h goes, in batches of 2.
	b.clock.Advance(t0.Add(28*time.Hour + 30*time.Minute).Sub(b.clock.Now()))
	n, err = in.PurgeExpired(ctx)
	if err != nil || n != 3 {
		t.Fatalf("PurgeExpired = %d, %v; want 3 (t0+2h…t0+4h)", n, err)
	}
	if n := b.records(t); n != 1 { // ids[0] again, received at t0+5h
		t.Fatalf("%d records left, want 1", n)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
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
	want, err := sqliteinbox.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("migrations/001_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("migrations/001_inbox.up.sql is stale; regenerate it from sqliteinbox.SchemaSQL(nil)")
	}
}

func TestOtherTableName(t *testing.T) {
	b := setup(t)
	drv, err := sqliteinbox.New(b.db, &sqliteinbox.Config{Table: "billing_inbox"})
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
	for _, d := range []*sqliteinbox.Driver{b.drv, drv} {
		if o, err := inbox.New(d, nil).Handle(context.Background(), m, effect); err != nil || o != inbox.Handled {
			t.Fatalf("Handle = %v, %v; want handled", o, err)
		}
	}
}

func TestBadNames(t *testing.T) {
	for _, cfg := range []sqliteinbox.Config{{Table: `a"b`}, {Table: "x; DROP TABLE y"}, {Table: "1abc"}} {
		if _, err := sqliteinbox.New(nil, &cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
		if _, err := sqliteinbox.SchemaSQL(&cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
	}
	if _, err := sqliteinbox.New(nil, nil); err == nil {
		t.Error("New(nil db) succeeded")
	}
}

func TestSchemaMissingAndInvalidMessage(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := sqliteinbox.New(db, nil) // never migrated
	if err != nil {
		t.Fatal(err)
	}
	in := inbox.New(d, nil)
	nop := func(context.Context, *sql.Tx, inbox.Message) error { return nil }
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
