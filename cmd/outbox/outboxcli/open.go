package outboxcli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/postgres"
	"github.com/outboxgo/outbox/stores"
)

// db is an opened outbox store.
type db struct {
	store stores.Store
	// check returns outbox.ErrSchemaMissing (wrapped) when the table is
	// missing.
	check func(ctx context.Context) error
	close func()
	where string // the redacted URL, for messages
	table string // the table as the database names it: outbox.messages, outbox_messages
}

// openMode says whether a command may create the database.
type openMode int

const (
	// existing refuses a database that does not exist yet (a SQLite
	// file): every command but migrate.
	existing openMode = iota
	// create makes it (migrate).
	create
)

var databaseSchemes = []string{"postgres", "postgresql", "mysql", "sqlite"}

// scheme returns the URL's scheme, or an error that names the URL (redacted)
// and the schemes we know.
func scheme(what, raw string, known ...string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("no %s: set --%s or %s", what, what, envName(what))
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("--%s %s: not a URL (want %s://…)", what, redact.URL(raw), strings.Join(known, "://…, "))
	}
	for _, k := range known {
		if u.Scheme == k {
			return k, nil
		}
	}
	return "", fmt.Errorf("--%s %s: unsupported scheme %q (want %s)", what, redact.URL(raw), u.Scheme, strings.Join(known, ", "))
}

// checkDB validates the database flags without connecting: the URL's
// scheme and form, the schema and table names.
func (g *globals) checkDB(c *checks) {
	g.checkNames(c)
	sch, err := scheme("database-url", g.databaseURL, databaseSchemes...)
	if err != nil {
		c.add(err)
		return
	}
	switch sch {
	case "sqlite":
		if _, err := sqlitePath(g.databaseURL); err != nil {
			c.add(err)
		}
	case "mysql":
		if _, err := g.mysqlConnector(); err != nil {
			c.add(err)
		}
	}
}

// openDB connects to the database the flags name. It pings, so an
// unreachable database is reported here, once, by name. The caller has
// validated the flags (checkDB).
func (g *globals) openDB(ctx context.Context, mode openMode) (*db, error) {
	sch, err := scheme("database-url", g.databaseURL, databaseSchemes...)
	if err != nil {
		return nil, err
	}
	where := redact.URL(g.databaseURL)
	switch sch {
	case "postgres", "postgresql":
		return g.openPostgres(ctx, where)
	case "sqlite":
		return g.openSQLite(where, mode)
	case "mysql":
		return g.openMySQL(ctx, where)
	}
	return nil, fmt.Errorf("unreachable: scheme %q", sch)
}

func (g *globals) postgresConfig() *postgres.Config {
	return &postgres.Config{Schema: g.schema, Table: g.table, ClaimTimeout: g.claimTimeout}
}

func (g *globals) openPostgres(ctx context.Context, where string) (*db, error) {
	cfg := g.postgresConfig()
	if _, err := postgres.SchemaSQL(cfg); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(g.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url %s: %s", where, pgErrText(err))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(pctx, pcfg)
	if err == nil {
		err = pool.Ping(pctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s: %s", where, pgErrText(err))
	}
	s, err := postgres.New(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &db{
		store: s,
		check: s.CheckSchema,
		close: pool.Close,
		where: where,
		table: g.schema + "." + g.table,
	}, nil
}

// pgErrText is err's message with any password hidden (pgx quotes the
// connection string in parse errors).
func pgErrText(err error) string {
	return redact.Text(err.Error())
}

// schemaMissing turns ErrSchemaMissing into the advice the user needs.
func schemaMissing(err error, d *db) error {
	if errors.Is(err, outbox.ErrSchemaMissing) {
		return fmt.Errorf("the outbox table %s does not exist in %s: run `outbox migrate` first", d.table, d.where)
	}
	return err
}
