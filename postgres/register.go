package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// The schemes postgres:// and postgresql:// open a pgx pool on the URL,
// which is a libpq connection URL with pgx's pool parameters
// (pool_max_conns, …, at least 8 connections unless pool_max_conns says
// otherwise); any other query parameter is a run-time parameter of the
// session, which the server checks.
func init() {
	backend.RegisterDatabase(backend.Database{
		Name:     "PostgreSQL",
		Forms:    []string{"postgres://user:pass@host:5432/db", "postgresql://…"},
		Schemes:  []string{"postgres", "postgresql"},
		Validate: validateURL,
		Open:     openURL,
		SchemaSQL: func(o *backend.DatabaseOptions) (string, error) {
			return SchemaSQL(optionsConfig(o))
		},
	})
}

// connectTimeout bounds the connect and ping of openURL.
const connectTimeout = 10 * time.Second

// optionsConfig maps the options every database takes to a Config.
func optionsConfig(o *backend.DatabaseOptions) *Config {
	if o == nil {
		return nil
	}
	return &Config{Schema: o.Schema, Table: o.Table, ClaimTimeout: o.ClaimTimeout, Logger: o.Logger}
}

// validateURL checks the URL's form and pgx's parameters without
// connecting.
func validateURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

// minPoolConns is the fewest connections a pool opened from a URL gets
// unless the URL sets pool_max_conns: each relay worker may hold two claims
// (a batch and its continuation, see Continue), and the LISTEN session
// holds one; pgx's default is max(4, CPUs).
const minPoolConns = 8

func parseURL(rawURL string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url %s: %s", redact.URL(rawURL), pgErrText(err))
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		pcfg.MaxConns = max(pcfg.MaxConns, minPoolConns)
	}
	return pcfg, nil
}

// openURL connects and pings within connectTimeout, so an unreachable
// database is reported here, once, by its redacted URL.
func openURL(ctx context.Context, rawURL string, o *backend.DatabaseOptions) (backend.DB, error) {
	cfg := optionsConfig(o)
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	pcfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if o != nil && o.Application != "" && pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = o.Application
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(pctx, pcfg)
	if err == nil {
		err = pool.Ping(pctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("cannot reach PostgreSQL at %s: %s", redact.URL(rawURL), pgErrText(err))
	}
	db, err := New(pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return opened{db}, nil
}

// pgErrText is err's message with any password hidden (pgx quotes the
// connection string in parse errors).
func pgErrText(err error) string {
	return redact.Text(err.Error())
}

// opened is a DB opened by URL, as backend.DB: it owns its pool.
type opened struct{ db *DB }

func (o opened) Store() stores.Store { return o.db.Store() }

// Table is outbox.messages: the schema and the table.
func (o opened) Table() string { return o.db.cfg.Schema + "." + o.db.cfg.Table }

func (o opened) CheckSchema(ctx context.Context) error { return o.db.Store().CheckSchema(ctx) }

func (o opened) Migrate(ctx context.Context) error { return o.db.Migrate(ctx) }
func (o opened) SchemaVersions(ctx context.Context) ([]stores.SchemaVersion, error) {
	return o.db.SchemaVersions(ctx)
}

func (o opened) Close() error {
	o.db.pool.Close()
	return nil
}
