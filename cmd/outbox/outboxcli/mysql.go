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

	"github.com/outboxgo/outbox/cmd/outbox/internal/logbridge"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/mysql"
)

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
	return dsn, nil
}

// mysqlConnector parses --database-url into the driver's configuration.
func (g *globals) mysqlConnector() (*gomysql.Config, error) {
	dsn, err := mysqlDSN(g.databaseURL)
	if err == nil {
		var cfg *gomysql.Config
		if cfg, err = gomysql.ParseDSN(dsn); err == nil {
			return cfg, nil
		}
	}
	return nil, fmt.Errorf("--database-url %s: %s", redact.URL(g.databaseURL), redact.Text(err.Error()))
}

// mysqlConfig maps the flags to MySQL, where the table lives in the URL's
// database: it is <schema>_<table>, outbox_messages by default.
func (g *globals) mysqlConfig() *mysql.Config {
	return &mysql.Config{Table: g.schema + "_" + g.table, ClaimTimeout: g.claimTimeout}
}

func (g *globals) openMySQL(ctx context.Context, where string) (*db, error) {
	cfg := g.mysqlConfig()
	if _, err := mysql.SchemaSQL(cfg); err != nil {
		return nil, err
	}
	mcfg, err := g.mysqlConnector()
	if err != nil {
		return nil, err
	}
	// The driver's own lines ("closing bad idle connection") go to our
	// log, not to its "[mysql]" logger on stderr.
	mcfg.Logger = logbridge.MySQL{Logger: g.logger()}
	conn, err := gomysql.NewConnector(mcfg)
	if err != nil {
		return nil, fmt.Errorf("--database-url %s: %s", where, redact.Text(err.Error()))
	}
	sdb := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = sdb.PingContext(pctx)
	cancel()
	if err != nil {
		_ = sdb.Close()
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
