package faults

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the inbox process

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/testkit/pgtest"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// pgDatabase is PostgreSQL: a private cluster when this machine can make
// one (restartable), else a schema of the shared server.
type pgDatabase struct {
	pool    *pgxpool.Pool
	cluster *pgCluster // nil: the shared server
	url     string     // without application_name
	schema  string
	appName string // the relays' and the inbox's application_name
	ob      *outbox.Outbox[pgx.Tx]
}

func newPostgres(t *testing.T) *pgDatabase {
	t.Helper()
	d := &pgDatabase{schema: "faults", appName: fmt.Sprintf("outbox-faults-relay-%08x", rand.Uint32())}
	if c, err := startCluster(t); err == nil {
		d.cluster, d.url = c, c.url("")
	} else {
		t.Logf("no private PostgreSQL cluster (%v): using the shared one; the database restart is not done", err)
		d.url = pgtest.URL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		pgtest.Pool(t) // skips (or fails in CI) with a message when the shared server is unreachable
		t.Fatalf("connect to %s: %v", d.url, err)
	}
	t.Cleanup(pool.Close)
	d.pool = pool
	if d.cluster == nil {
		d.schema = pgtest.Schema(t, pool)
	}
	db, err := postgres.New(pool, &postgres.Config{Schema: d.schema})
	if err != nil {
		t.Fatal(err)
	}
	d.ob = outbox.New(db, nil)
	return d
}

func (d *pgDatabase) name() string {
	if d.cluster == nil {
		return "PostgreSQL (shared server)"
	}
	return "PostgreSQL"
}

func (d *pgDatabase) env() []string {
	sep := "?"
	if strings.Contains(d.url, "?") {
		sep = "&"
	}
	return []string{envDBKind + "=postgres", envDB + "=" + d.url + sep + "application_name=" + url.QueryEscape(d.appName),
		envSchema + "=" + d.schema}
}

func (d *pgDatabase) q(table string) string { return `"` + d.schema + `".` + table }

func (d *pgDatabase) prepare(ctx context.Context, keys []string) error {
	db, err := postgres.New(d.pool, &postgres.Config{Schema: d.schema})
	if err != nil {
		return err
	}
	if err := db.Migrate(ctx); err != nil { // the outbox and the inbox tables
		return err
	}
	_, err = d.pool.Exec(ctx, `CREATE TABLE `+d.q("counters")+` (key text PRIMARY KEY, n int NOT NULL DEFAULT 0);
		CREATE TABLE `+d.q("log")+` (id uuid PRIMARY KEY, key text NOT NULL, n int NOT NULL);
		CREATE TABLE `+d.q("effects")+` (msg_id uuid NOT NULL)`)
	if err == nil {
		_, err = d.pool.Exec(ctx, `INSERT INTO `+d.q("counters")+` (key) SELECT unnest($1::text[])`, keys)
	}
	return err
}

func (d *pgDatabase) write(ctx context.Context, m outbox.Message, rollback bool) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if err := d.ob.Enqueue(ctx, tx, m); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `WITH c AS (UPDATE `+d.q("counters")+` SET n = n + 1 WHERE key = $2 RETURNING n)
			INSERT INTO `+d.q("log")+` (id, key, n) SELECT $1, $2, n FROM c`, m.ID, m.Key); err != nil {
			return err
		}
		if rollback {
			return errRollbackOnPurpose
		}
		return nil
	})
}

func (d *pgDatabase) enqueue(ctx context.Context, m outbox.Message) (enqErr, err error) {
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		enqErr = d.ob.Enqueue(ctx, tx, m)
		return nil
	})
	return enqErr, err
}

func (d *pgDatabase) committed(ctx context.Context) (map[uuid.UUID]commit, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, key, n FROM `+d.q("log"))
	if err != nil {
		return nil, err
	}
	log := map[uuid.UUID]commit{}
	var (
		id uuid.UUID
		c  commit
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &c.key, &c.rank}, func() error { log[id] = c; return nil })
	return log, err
}

func (d *pgDatabase) dead(ctx context.Context) (map[uuid.UUID]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT id, coalesce(last_error, '') FROM `+d.q("messages")+` WHERE status = 2`)
	if err != nil {
		return nil, err
	}
	dead := map[uuid.UUID]string{}
	var (
		id uuid.UUID
		le string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &le}, func() error { dead[id] = le; return nil })
	return dead, err
}

func (d *pgDatabase) pending(ctx context.Context) (n int, err error) {
	err = d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.q("messages")+` WHERE status = 0`).Scan(&n)
	return n, err
}

func (d *pgDatabase) exists(ctx context.Context, id uuid.UUID) (bool, error) {
	var ok bool
	err := d.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+d.q("messages")+` WHERE id = $1)`, id).Scan(&ok)
	return ok, err
}

func (d *pgDatabase) effects(ctx context.Context) (map[uuid.UUID]int, error) {
	rows, err := d.pool.Query(ctx, `SELECT msg_id, count(*) FROM `+d.q("effects")+` GROUP BY msg_id`)
	if err != nil {
		return nil, err
	}
	eff := map[uuid.UUID]int{}
	var (
		id uuid.UUID
		n  int
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { eff[id] = n; return nil })
	return eff, err
}

func (d *pgDatabase) killConns(ctx context.Context) (n int, err error) {
	err = d.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		d.appName).Scan(&n)
	return n, err
}

func (d *pgDatabase) restart() error {
	if d.cluster == nil {
		return errNoRestart
	}
	return d.cluster.restart()
}

// pgRelayStore is the relay process's store.
func pgRelayStore(ctx context.Context) (stores.Store, error) {
	pcfg, err := pgxpool.ParseConfig(os.Getenv(envDB))
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg) // connects lazily: survives a database down at start
	if err != nil {
		return nil, err
	}
	db, err := postgres.New(pool, &postgres.Config{Schema: os.Getenv(envSchema), ClaimTimeout: claimTimeout})
	if err != nil {
		return nil, err
	}
	return db.Store(), nil
}

// pgInbox is the inbox process's inbox and effect, through database/sql.
func pgInbox(context.Context) (*inbox.Inbox[*sql.Tx], inbox.Handler[*sql.Tx], error) {
	db, err := sql.Open("pgx", os.Getenv(envDB))
	if err != nil {
		return nil, nil, err
	}
	schema := os.Getenv(envSchema)
	sdb, err := postgres.NewSQL(db, &postgres.Config{Schema: schema})
	if err != nil {
		return nil, nil, err
	}
	in, err := inbox.New(sdb.Inbox(), nil)
	if err != nil {
		return nil, nil, err
	}
	effect := `INSERT INTO "` + schema + `".effects (msg_id) VALUES ($1)`
	return in, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, effect, m.ID)
		return err
	}, nil
}
