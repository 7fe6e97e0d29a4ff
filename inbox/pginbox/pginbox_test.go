package pginbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/pginbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/pgtest"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/postgres"
)

// bundle is a test's own schema with the inbox table and an effects table.
type bundle struct {
	pool   *pgxpool.Pool
	db     *sql.DB
	cfg    *pginbox.Config
	pgx    *pginbox.PgxDriver
	sqlDrv *pginbox.SQLDriver
	clock  *clocktest.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	cfg := &pginbox.Config{Schema: pgtest.Schema(t, pool), Table: "received"}
	d, err := pginbox.NewPgx(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+cfg.Schema+`".effects (msg_id uuid NOT NULL, note text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	sd, err := pginbox.NewSQL(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, db: db, cfg: cfg, pgx: d, sqlDrv: sd,
		clock: clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
}

func (b *bundle) effects(t testing.TB, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+b.cfg.Schema+`".effects WHERE msg_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bundle) records(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM "`+b.cfg.Schema+`".received`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func msg() inbox.Message {
	return inbox.Message{ID: outbox.NewID(), Topic: "orders", Key: "k1", Type: "OrderConfirmed", Payload: []byte(`{}`)}
}

// The same message handled three times, through each driver: one effect.
func TestDuplicateHasOneEffect(t *testing.T) {
	b := setup(t)
	t.Run("pgx", func(t *testing.T) {
		in := inbox.New(b.pgx, &inbox.Config{Clock: b.clock})
		m := msg()
		var outcomes []inbox.Outcome
		for range 3 {
			o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
				_, err := tx.Exec(ctx, `INSERT INTO "`+b.cfg.Schema+`".effects VALUES ($1, 'pgx')`, m.ID)
				return err
			})
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
	})
	t.Run("database/sql", func(t *testing.T) {
		in := inbox.New(b.sqlDrv, &inbox.Config{Clock: b.clock})
		m := msg()
		var outcomes []inbox.Outcome
		for range 3 {
			o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO "`+b.cfg.Schema+`".effects VALUES ($1, 'sql')`, m.ID.String())
				return err
			})
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
	})
}

// A failing handler rolls back its effect and the record, so the next
// delivery runs it again; a panicking one too.
func TestFailureRecordsNothing(t *testing.T) {
	b := setup(t)
	for name, in := range map[string]interface {
		handle(ctx context.Context, m inbox.Message, fail error, panics bool) (inbox.Outcome, error)
	}{
		"pgx": pgxHandler{inbox.New(b.pgx, nil), b.cfg.Schema},
		"sql": sqlHandler{inbox.New(b.sqlDrv, nil), b.cfg.Schema},
	} {
		t.Run(name, func(t *testing.T) {
			m := msg()
			boom := errors.New("boom")
			if _, err := in.handle(context.Background(), m, boom, false); !errors.Is(err, boom) {
				t.Fatalf("Handle = %v, want the handler's error", err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the handler's panic did not propagate")
					}
				}()
				_, _ = in.handle(context.Background(), m, nil, true)
			}()
			if n := b.effects(t, m.ID); n != 0 {
				t.Fatalf("%d effects after failures, want 0", n)
			}
			o, err := in.handle(context.Background(), m, nil, false)
			if err != nil || o != inbox.Handled {
				t.Fatalf("Handle after failures = %v, %v; want handled", o, err)
			}
			if n := b.effects(t, m.ID); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

type pgxHandler struct {
	in     *inbox.Inbox[pgx.Tx]
	schema string
}

func (h pgxHandler) handle(ctx context.Context, m inbox.Message, fail error, panics bool) (inbox.Outcome, error) {
	return h.in.Handle(ctx, m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		if _, err := tx.Exec(ctx, `INSERT INTO "`+h.schema+`".effects VALUES ($1, 'x')`, m.ID); err != nil {
			return err
		}
		if panics {
			panic("handler panics")
		}
		return fail
	})
}

type sqlHandler struct {
	in     *inbox.Inbox[*sql.Tx]
	schema string
}

func (h sqlHandler) handle(ctx context.Context, m inbox.Message, fail error, panics bool) (inbox.Outcome, error) {
	return h.in.Handle(ctx, m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO "`+h.schema+`".effects VALUES ($1, 'x')`, m.ID.String()); err != nil {
			return err
		}
		if panics {
			panic("handler panics")
		}
		return fail
	})
}

// A second delivery while the first is still in its transaction waits on
// the first's uncommitted record: it is a duplicate when the first commits,
// and runs the handler when the first rolls back.
func TestConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	for _, firstFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("first fails %v", firstFails), func(t *testing.T) {
			b := setup(t)
			in := inbox.New(b.pgx, nil)
			m := msg()
			inside, release := make(chan struct{}), make(chan struct{})
			effect := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
				_, err := tx.Exec(ctx, `INSERT INTO "`+b.cfg.Schema+`".effects VALUES ($1, 'x')`, m.ID)
				return err
			}
			type result struct {
				o   inbox.Outcome
				err error
			}
			first, second := make(chan result, 1), make(chan result, 1)
			go func() {
				o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
				o, err := in.Handle(context.Background(), m, effect)
				second <- result{o, err}
			}()
			// The second insert blocks on the first's row lock.
			waitFor(t, "the second delivery to wait on the first's record", 10*time.Second, func() bool {
				var n int
				err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, `"`+b.cfg.Schema+`"."received"`).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			})
			select {
			case r := <-second:
				t.Fatalf("the second delivery returned %v, %v before the first ended", r.o, r.err)
			default:
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
	in := inbox.New(b.pgx, nil)
	msgs := make([]inbox.Message, 20)
	for i := range msgs {
		msgs[i] = msg()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(msgs))
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range msgs {
				_, err := in.Handle(context.Background(), m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
					_, err := tx.Exec(ctx, `INSERT INTO "`+b.cfg.Schema+`".effects VALUES ($1, 'x')`, m.ID)
					return err
				})
				if err != nil {
					errs <- err
				}
			}
		}()
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

// A handler's chained events commit with its effect and its record, and
// not at all when it fails.
func TestChainedEventsCommitWithTheRecord(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	scfg := &postgres.Config{Schema: b.cfg.Schema}
	store, err := postgres.New(b.pool, scfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	od, _ := postgres.NewPgxDriver(scfg)
	ob := outbox.New(od, nil)
	in := inbox.New(b.pgx, nil)
	handle := func(m inbox.Message, fail bool) error {
		_, err := in.Handle(ctx, m, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
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
	var payloads []string
	rows, _ := b.pool.Query(ctx, `SELECT convert_from(payload, 'UTF8') FROM "`+b.cfg.Schema+`".messages`)
	payloads, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(payloads) != 1 || payloads[0] != ok.ID.String() {
		t.Fatalf("outbox holds %v, want one event chained from %s", payloads, ok.ID)
	}
}

func TestPurge(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	in := inbox.New(b.pgx, &inbox.Config{Clock: b.clock, Retention: 24 * time.Hour, PurgeBatch: 2})
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
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
	sin := inbox.New(b.sqlDrv, nil)
	if n, err := sin.Purge(ctx, t0.Add(100*time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("Purge through database/sql = %d, %v; want 1", n, err)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	b := setup(t) // migrated once through pgx
	ctx := context.Background()
	if err := b.pgx.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.sqlDrv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
}

// The plain SQL file for goose, golang-migrate and atlas users is the
// template rendered with the defaults.
func TestPlainSQLFileMatches(t *testing.T) {
	want, err := pginbox.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("migrations/001_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("migrations/001_inbox.up.sql is stale; regenerate it from pginbox.SchemaSQL(nil)")
	}
}

func TestBadNames(t *testing.T) {
	for _, cfg := range []pginbox.Config{{Schema: `a"b`}, {Table: "x; DROP TABLE y"}, {Table: "1abc"}} {
		if _, err := pginbox.NewPgx(nil, &cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("NewPgx(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
		if _, err := pginbox.NewSQL(nil, &cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("NewSQL(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
		if _, err := pginbox.SchemaSQL(&cfg); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%+v) = %v, want ErrBadIdentifier", cfg, err)
		}
	}
}

func TestSchemaMissingAndInvalidMessage(t *testing.T) {
	pool := pgtest.Pool(t)
	d, err := pginbox.NewPgx(pool, &pginbox.Config{Schema: pgtest.Schema(t, pool)}) // never migrated
	if err != nil {
		t.Fatal(err)
	}
	in := inbox.New(d, nil)
	nop := func(context.Context, pgx.Tx, inbox.Message) error { return nil }
	if _, err := in.Handle(context.Background(), msg(), nop); !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("Handle without the table = %v, want ErrSchemaMissing", err)
	}
	_, err = in.Handle(context.Background(), inbox.Message{Topic: "x"}, nop)
	if !errors.Is(err, inbox.ErrInvalidMessage) || !inbox.IsPermanent(err) {
		t.Fatalf("Handle without an ID = %v, want a permanent ErrInvalidMessage", err)
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
