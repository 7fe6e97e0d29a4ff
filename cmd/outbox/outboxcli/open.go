package outboxcli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
	"github.com/outboxgo/outbox/stores/mysql"
	"github.com/outboxgo/outbox/stores/postgres"
	"github.com/outboxgo/outbox/stores/sqlite"
)

// db is an opened outbox store.
type db struct {
	store stores.Store
	// check returns outbox.ErrSchemaMissing (wrapped) when the table is
	// missing.
	check func(ctx context.Context) error
	close func()
	where string // the redacted URL, for messages
	table string // schema.table, for messages
}

// scheme returns the URL's scheme, or an error that names the URL (redacted)
// and the schemes we know.
func scheme(what, raw string, known ...string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("no %s: set --%s or OUTBOX_%s", what, what, strings.ToUpper(strings.ReplaceAll(what, "-", "_")))
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

// openDB connects to the database the flags name. It pings, so an
// unreachable database is reported here, once, by name.
func (g *globals) openDB(ctx context.Context) (*db, error) {
	sch, err := scheme("database-url", g.databaseURL, "postgres", "postgresql", "mysql", "sqlite")
	if err != nil {
		return nil, err
	}
	where := redact.URL(g.databaseURL)
	switch sch {
	case "postgres", "postgresql":
		cfg := &postgres.Config{Schema: g.schema, Table: g.table}
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
	case "sqlite":
		return g.openSQLite(ctx, where)
	case "mysql":
		return g.openMySQL(ctx, where)
	}
	return nil, fmt.Errorf("unreachable: scheme %q", sch)
}

// sqliteConfig maps the flags to SQLite, which has no schemas: the table is
// <schema>_<table>, outbox_messages by default.
func (g *globals) sqliteConfig() *sqlite.Config {
	return &sqlite.Config{Table: g.schema + "_" + g.table}
}

// sqlitePath is the file a sqlite:// URL names: sqlite:///abs/path.db or
// sqlite://relative/path.db.
func sqlitePath(raw string) string {
	p := strings.TrimPrefix(raw, "sqlite://")
	p, _, _ = strings.Cut(p, "?")
	return p
}

func (g *globals) openSQLite(ctx context.Context, where string) (*db, error) {
	cfg := g.sqliteConfig()
	if _, err := sqlite.SchemaSQL(cfg); err != nil {
		return nil, err
	}
	path := sqlitePath(g.databaseURL)
	if path == "" {
		return nil, fmt.Errorf("--database-url %s: no file (want sqlite:///path/to/file.db)", where)
	}
	sdb, err := sqlite.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open SQLite database %s: %s", path, redact.Text(err.Error()))
	}
	s, err := sqlite.New(sdb, cfg)
	if err != nil {
		_ = sdb.Close()
		return nil, err
	}
	return &db{
		store: s,
		check: s.CheckSchema,
		close: func() { _ = sdb.Close() },
		where: where,
		table: cfg.Table,
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

// mysqlDSN turns mysql://user:pass@host:3306/db?param=v into the driver's
// user:pass@tcp(host:3306)/db?param=v.
func mysqlDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	cfg := gomysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return "", errors.New("no database name (want mysql://user:pass@host:3306/dbname)")
	}
	dsn := cfg.FormatDSN()
	if u.RawQuery != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + u.RawQuery
	}
	if _, err := gomysql.ParseDSN(dsn); err != nil {
		return "", err
	}
	return dsn, nil
}

// mysqlConfig maps the flags to MySQL, where the table lives in the URL's
// database: it is <schema>_<table>, outbox_messages by default.
func (g *globals) mysqlConfig() *mysql.Config {
	return &mysql.Config{Table: g.schema + "_" + g.table}
}

func (g *globals) openMySQL(ctx context.Context, where string) (*db, error) {
	cfg := g.mysqlConfig()
	if _, err := mysql.SchemaSQL(cfg); err != nil {
		return nil, err
	}
	dsn, err := mysqlDSN(g.databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url %s: %s", where, redact.Text(err.Error()))
	}
	sdb, err := sql.Open("mysql", dsn)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = sdb.PingContext(pctx)
		cancel()
	}
	if err != nil {
		if sdb != nil {
			_ = sdb.Close()
		}
		return nil, fmt.Errorf("cannot reach MySQL at %s: %s", where, redact.Text(err.Error()))
	}
	s, err := mysql.New(sdb, cfg)
	if err != nil {
		_ = sdb.Close()
		return nil, err
	}
	return &db{
		store: s,
		check: s.CheckSchema,
		close: func() { _ = sdb.Close() },
		where: where,
		table: cfg.Table,
	}, nil
}
