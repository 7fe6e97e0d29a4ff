package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// Importing the package registers the scheme mysql:// (MySQL and MariaDB)
// with package backend, for tools that open a database by URL (the outbox
// command): mysql://user:pass@host:3306/db?param=v, where the query
// parameters are go-sql-driver/mysql's own (parseTime, tls, timeout, …;
// any other is a session variable to set).
func init() {
	backend.RegisterDatabase(backend.Database{
		Name:      "MySQL",
		Schemes:   []string{"mysql"},
		Forms:     []string{"mysql://user:pass@host:3306/db"},
		Validate:  validateURL,
		Open:      openURL,
		SchemaSQL: urlSchemaSQL,
	})
}

// pingTimeout bounds the check that a database opened by URL answers.
const pingTimeout = 10 * time.Second

// dsn turns mysql://user:pass@host:3306/db?param=v into the driver's
// user:pass@tcp(host:3306)/db?param=v.
func dsn(raw string) (string, error) {
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
	d := cfg.FormatDSN()
	if u.RawQuery != "" {
		sep := "?"
		if strings.Contains(d, "?") {
			sep = "&"
		}
		d += sep + u.RawQuery
	}
	return d, nil
}

// driverConfig parses a mysql:// URL into the driver's configuration. Its
// errors name the URL with the password hidden.
func driverConfig(rawURL string) (*gomysql.Config, error) {
	d, err := dsn(rawURL)
	if err == nil {
		var cfg *gomysql.Config
		if cfg, err = gomysql.ParseDSN(d); err == nil {
			return cfg, nil
		}
		err = paramError(rawURL, err)
	}
	return nil, fmt.Errorf("--database-url %s: %s", redact.URL(rawURL), redact.Text(err.Error()))
}

// paramError names the URL parameter that err, the driver's refusal of the
// whole URL, is about ("invalid bool value: maybe" does not), by trying each
// parameter alone.
func paramError(rawURL string, err error) error {
	u, perr := url.Parse(rawURL)
	if perr != nil || u.RawQuery == "" {
		return err
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		one := *u
		one.RawQuery = kv
		d, derr := dsn(one.String())
		if derr != nil {
			return err
		}
		if _, derr := gomysql.ParseDSN(d); derr != nil {
			name, _, _ := strings.Cut(kv, "=")
			if n, uerr := url.QueryUnescape(name); uerr == nil {
				name = n
			}
			return fmt.Errorf("parameter %s: %w", name, derr)
		}
	}
	return err
}

// validateURL is backend.Database.Validate: the URL's form and the
// driver's parameters, without connecting.
func validateURL(rawURL string) error {
	_, err := driverConfig(rawURL)
	return err
}

// urlConfig maps backend options to a Config. MySQL has no schema level
// below the database, so the outbox table is <schema>_<table>,
// outbox_messages by default.
func urlConfig(o *backend.DatabaseOptions) *Config {
	opts := o.WithDefaults()
	return &Config{Table: opts.Schema + "_" + opts.Table, ClaimTimeout: opts.ClaimTimeout, Logger: opts.Logger}
}

// urlSchemaSQL is backend.Database.SchemaSQL: what the opened database's
// Migrate runs, the outbox table's and the inbox table's migrations.
func urlSchemaSQL(o *backend.DatabaseOptions) (string, error) {
	return SchemaSQL(urlConfig(o))
}

// openURL is backend.Database.Open: it connects, pings, and returns the
// outbox table's side of a DB. The driver's own log lines ("closing bad
// idle connection") go to o.Logger, not to its "[mysql]" logger on stderr.
func openURL(ctx context.Context, rawURL string, o *backend.DatabaseOptions) (backend.DB, error) {
	cfg := urlConfig(o)
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	mcfg, err := driverConfig(rawURL)
	if err != nil {
		return nil, err
	}
	where := redact.URL(rawURL)
	mcfg.Logger = driverLogger{cfg.Logger}
	conn, err := gomysql.NewConnector(mcfg)
	if err != nil {
		return nil, fmt.Errorf("--database-url %s: %s", where, redact.Text(err.Error()))
	}
	sdb := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	err = sdb.PingContext(pctx)
	cancel()
	if err != nil {
		_ = sdb.Close()
		return nil, fmt.Errorf("cannot reach MySQL at %s: %s", where, redact.Text(err.Error()))
	}
	d, err := New(sdb, cfg)
	if err != nil {
		_ = sdb.Close()
		return nil, err
	}
	return &urlDB{d: d, sdb: sdb}, nil
}

// urlDB is a DB opened by URL, as tools see it: its outbox table.
type urlDB struct {
	d   *DB
	sdb *sql.DB
}

func (u *urlDB) Store() stores.Store                   { return u.d.Store() }
func (u *urlDB) Table() string                         { return u.d.cfg.Table }
func (u *urlDB) CheckSchema(ctx context.Context) error { return u.d.Store().CheckSchema(ctx) }
func (u *urlDB) Migrate(ctx context.Context) error     { return u.d.Migrate(ctx) }
func (u *urlDB) SchemaVersions(ctx context.Context) ([]stores.SchemaVersion, error) {
	return u.d.SchemaVersions(ctx)
}
func (u *urlDB) Close() error { return u.sdb.Close() }

// driverLogger is a go-sql-driver/mysql Logger that writes each line of
// the driver to a *slog.Logger at Warn, with component=mysql-driver. The
// driver logs only what it recovers from (closing a bad idle connection, a
// connection lost mid-query, which the caller sees as an error too), hence
// Warn.
type driverLogger struct{ log *slog.Logger }

// Print implements gomysql.Logger.
func (l driverLogger) Print(v ...any) {
	l.log.Warn(strings.TrimRight(fmt.Sprint(v...), "\r\n"), "component", "mysql-driver")
}
