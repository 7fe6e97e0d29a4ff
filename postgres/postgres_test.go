package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/storetest"
)

// bundle is a test's own schema, migrated, with the backend on it through
// pgx and through database/sql.
type bundle struct {
	pool  *pgxpool.Pool
	db    *sql.DB
	cfg   *postgres.Config
	pg    *postgres.DB
	sqldb *postgres.SQLDB
	store *postgres.Store
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	cfg := &postgres.Config{Schema: pgtest.Schema(t, pool)}
	pg, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	sqldb, err := postgres.NewSQL(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return bundle{pool: pool, db: db, cfg: cfg, pg: pg, sqldb: sqldb, store: pg.Store()}
}

func TestConformancePgx(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		ob := outbox.New(b.pg, nil)
		return storetest.Harness{Store: b.store, Enqueue: func(ctx context.Context, msgs []outbox.Message, commit bool) error {
			err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				if err := ob.Enqueue(ctx, tx, msgs...); err != nil {
					return err
				}
				if !commit {
					return errRollback
				}
				return nil
			})
			if errors.Is(err, errRollback) {
				return nil
			}
			return err
		}, Begin: func(ctx context.Context) (storetest.Tx, error) {
			tx, err := b.pool.Begin(ctx)
			return pgxTx{tx: tx, ob: ob}, err
		}, Open: func(t *testing.T) stores.Store {
			other, err := postgres.New(b.pool, b.cfg)
			if err != nil {
				t.Fatal(err)
			}
			return other.Store()
		},
			StepBack:       func(ctx context.Context) error { return stepBack(ctx, b) },
			MigrationWaits: func(ctx context.Context) (bool, error) { return migrationWaits(ctx, b) },
		}
	})
}

type pgxTx struct {
	tx pgx.Tx
	ob *outbox.Outbox[pgx.Tx]
}

func (t pgxTx) Enqueue(ctx context.Context, msgs ...outbox.Message) error {
	return t.ob.Enqueue(ctx, t.tx, msgs...)
}
func (t pgxTx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t pgxTx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

type sqlTx struct {
	tx *sql.Tx
	ob *outbox.Outbox[*sql.Tx]
}

func (t sqlTx) Enqueue(ctx context.Context, msgs ...outbox.Message) error {
	return t.ob.Enqueue(ctx, t.tx, msgs...)
}
func (t sqlTx) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTx) Rollback(context.Context) error { return t.tx.Rollback() }

var errRollback = errors.New("rollback on purpose")

func TestConformanceDatabaseSQL(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		ob := outbox.New(b.sqldb, nil)
		return storetest.Harness{Store: b.store, Enqueue: func(ctx context.Context, msgs []outbox.Message, commit bool) error {
			tx, err := b.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := ob.Enqueue(ctx, tx, msgs...); err != nil {
				_ = tx.Rollback()
				return err
			}
			if !commit {
				return tx.Rollback()
			}
			return tx.Commit()
		}, Begin: func(ctx context.Context) (storetest.Tx, error) {
			tx, err := b.db.BeginTx(ctx, nil)
			return sqlTx{tx: tx, ob: ob}, err
		}}
	})
}

func TestEnqueueNeedsOpenTransaction(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	sd, pd := b.sqldb, b.pg
	m := outbox.Message{Topic: "orders"}

	if err := outbox.New(sd, nil).Enqueue(ctx, nil, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("database/sql, nil tx: %v, want ErrNoTransaction", err)
	}
	if err := outbox.New(pd, nil).Enqueue(ctx, nil, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("pgx, nil tx: %v, want ErrNoTransaction", err)
	}

	stx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = stx.Commit()
	if err := outbox.New(sd, nil).Enqueue(ctx, stx, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("database/sql, committed tx: %v, want ErrNoTransaction", err)
	}
	ptx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = ptx.Rollback(ctx)
	if err := outbox.New(pd, nil).Enqueue(ctx, ptx, m); !errors.Is(err, outbox.ErrNoTransaction) {
		t.Errorf("pgx, rolled-back tx: %v, want ErrNoTransaction", err)
	}
	st, _ := b.store.Stats(ctx, stores.StatsParams{Now: time.Now()})
	if len(st) != 0 {
		t.Fatalf("enqueue outside a transaction wrote rows: %+v", st)
	}
}

func TestSchemaMissing(t *testing.T) {
	pool := pgtest.Pool(t)
	cfg := &postgres.Config{Schema: pgtest.Schema(t, pool)} // never migrated
	d, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	ctx := context.Background()
	if err := s.CheckSchema(ctx); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("CheckSchema: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Claim(ctx, stores.ClaimParams{Limit: 1, Now: time.Now()}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Claim: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Stats(ctx, stores.StatsParams{Now: time.Now()}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Stats: %v, want ErrSchemaMissing", err)
	}
	if _, err := s.Blocked(ctx, stores.BlockedParams{}); !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Blocked: %v, want ErrSchemaMissing", err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"})
	})
	if !errors.Is(err, outbox.ErrSchemaMissing) {
		t.Errorf("Enqueue: %v, want ErrSchemaMissing", err)
	}
}

func TestBadIdentifiers(t *testing.T) {
	for _, c := range []postgres.Config{
		{Schema: "public; DROP TABLE x"},
		{Table: `a"b`},
		{Table: "1abc"},
		{Schema: "a-b"},
		{Table: "this_name_is_far_too_long_for_an_outbox_table_name"},
	} {
		if _, err := postgres.New(nil, &c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("New(%+v) = %v, want ErrBadIdentifier", c, err)
		}
		if _, err := postgres.NewSQL(nil, &c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("NewSQL(%+v) = %v, want ErrBadIdentifier", c, err)
		}
		if _, err := postgres.SchemaSQL(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL(%+v) = %v, want ErrBadIdentifier", c, err)
		}
	}
}

func TestListenWakes(t *testing.T) {
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	woke := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.store.Listen(ctx, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	waitWake(t, woke) // the wake on connect
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return outbox.New(b.pg, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke)
}

// TestListenQuiet: each wake-up says what its NOTIFY said of the writer's
// pacing: -1 on connecting, 0 for every enqueue that leaves its process a
// token for the next, NotifyDebounce for the one that took the last (the
// next enqueues skip their NOTIFY: none comes for the 11th here), and -1
// for the SQL function's NOTIFY, which says nothing.
func TestListenQuiet(t *testing.T) {
	b := setup(t)
	cfg := *b.cfg
	cfg.NotifyDebounce = time.Hour // no token comes back during the test
	pg, err := postgres.New(b.pool, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	heard := make(chan time.Duration, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.store.ListenQuiet(ctx, func(q time.Duration) { heard <- q })
	}()
	defer func() { cancel(); <-done }()
	next := func() time.Duration {
		t.Helper()
		select {
		case q := <-heard:
			return q
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up within 10s")
			return 0
		}
	}
	if q := next(); q != -1 {
		t.Fatalf("the wake-up on connecting says %v, want -1", q)
	}
	ob := outbox.New(pg, nil)
	for i := range 11 {
		if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			return ob.Enqueue(ctx, tx, outbox.Message{Topic: "x", Key: "k"})
		}); err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			break // the 11th skips its NOTIFY
		}
		want := time.Duration(0)
		if i == 9 {
			want = time.Hour
		}
		if q := next(); q != want {
			t.Fatalf("enqueue %d's wake-up says %v, want %v", i, q, want)
		}
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := sqlEnqueue(ctx, tx, b.cfg.Schema, outbox.Message{Topic: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The 11th enqueue's commit sent nothing: the next wake-up is the SQL
	// function's.
	if q := next(); q != -1 {
		t.Fatalf("the SQL function's wake-up says %v, want -1 (the 11th enqueue notified?)", q)
	}
}

func waitWake(t *testing.T, woke <-chan struct{}) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s")
	}
}
