package postgres_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
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

type bundle struct {
	pool  *pgxpool.Pool
	db    *sql.DB
	cfg   *postgres.Config
	store *postgres.Store
}

func setup(t *testing.T) bundle {
	t.Helper()
	pool := pgtest.Pool(t)
	cfg := &postgres.Config{Schema: pgtest.Schema(t, pool)}
	s, err := postgres.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = db.Close() })
	return bundle{pool: pool, db: db, cfg: cfg, store: s}
}

func TestConformancePgx(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		d, err := postgres.NewPgxDriver(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(d, nil)
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
		}}
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
		d, err := postgres.NewSQLDriver(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ob := outbox.New(d, nil)
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
	sd, _ := postgres.NewSQLDriver(b.cfg)
	pd, _ := postgres.NewPgxDriver(b.cfg)
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
	s, _ := postgres.New(pool, cfg)
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
	d, _ := postgres.NewPgxDriver(cfg)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
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
		if _, err := postgres.NewSQLDriver(&c); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("NewSQLDriver(%+v) = %v, want ErrBadIdentifier", c, err)
		}
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	b := setup(t) // migrated once through pgx
	ctx := context.Background()
	if err := b.store.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if err := postgres.Migrate(ctx, b.db, b.cfg); err != nil {
		t.Fatalf("Migrate through database/sql: %v", err)
	}
	var partial bool
	err := b.pool.QueryRow(ctx, `SELECT indexdef LIKE '%WHERE ((status = 0) AND (key = ''''::text))%' FROM pg_indexes
		WHERE schemaname = $1 AND indexname = 'messages_pending'`, b.cfg.Schema).Scan(&partial)
	if err != nil || !partial {
		t.Fatalf("pending index is not partial on pending rows (err %v)", err)
	}
}

// The plain SQL file for goose, golang-migrate and atlas users is the
// template rendered with the defaults; this keeps them from drifting.
func TestPlainSQLFileMatches(t *testing.T) {
	want, err := postgres.SchemaSQL(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("migrations/001_outbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("migrations/001_outbox.up.sql is stale; regenerate it with: go run ./cmd/outbox migrate --print > stores/postgres/migrations/001_outbox.up.sql")
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
	d, _ := postgres.NewPgxDriver(b.cfg)
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return outbox.New(d, nil).Enqueue(ctx, tx, outbox.Message{Topic: "x"})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitWake(t, woke)
}

func waitWake(t *testing.T, woke <-chan struct{}) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s")
	}
}
