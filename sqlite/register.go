package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/outboxgo/outbox/backend"
	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/stores"
)

// Importing the package registers the "sqlite" URL scheme, for tools that
// open a database by URL (backend.OpenDatabase, the outbox command).
func init() {
	backend.RegisterDatabase(backend.Database{
		Name:     "SQLite",
		Schemes:  []string{"sqlite"},
		Forms:    urlFormList,
		Validate: validateURL,
		Open:     openURL,
		SchemaSQL: func(o *backend.DatabaseOptions) (string, error) {
			return SchemaSQL(optionsConfig(o))
		},
	})
}

// urlFormList lists the forms of a sqlite: URL, for help.
var urlFormList = []string{"sqlite:///abs/path.db", "sqlite:/abs/path.db", "sqlite://rel/path.db", "sqlite:rel.db"}

// urlForms is urlFormList in a sentence, for messages.
const urlForms = "sqlite:///abs/path.db, sqlite:/abs/path.db, sqlite://rel/path.db or sqlite:rel.db"

// validateURL checks a sqlite: URL's form without touching the file.
func validateURL(raw string) error {
	_, err := urlPath(raw)
	return err
}

// urlPath is the file a sqlite: URL names:
//
//	sqlite:///abs/path.db  /abs/path.db
//	sqlite:/abs/path.db    /abs/path.db
//	sqlite://rel/path.db   rel/path.db (relative to the working directory)
//	sqlite:rel.db          rel.db
//
// %XX escapes are decoded. The URL takes no parameters (Open sets the
// connection's), and no user or password.
func urlPath(raw string) (string, error) {
	where := redact.URL(raw)
	rest, ok := strings.CutPrefix(raw, "sqlite:")
	if !ok {
		return "", fmt.Errorf("--database-url %s: not a sqlite: URL", where)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", fmt.Errorf("--database-url %s: SQLite URLs take no parameters (want %s)", where, urlForms)
	}
	if strings.HasPrefix(rest, "//") {
		rest = rest[2:] // sqlite:///abs → /abs; sqlite://rel → rel
		// sqlite://user:password@… would name the file
		// "user:password@…", and messages would show it.
		if host, _, _ := strings.Cut(rest, "/"); strings.Contains(host, "@") {
			return "", fmt.Errorf("--database-url %s: SQLite URLs take no user or password (want %s)", where, urlForms)
		}
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("--database-url %s: %w", where, err)
	}
	if p == "" || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("--database-url %s: no file (want %s)", where, urlForms)
	}
	return p, nil
}

// optionsConfig maps the tools' options to SQLite, which has no schemas:
// each table is <schema>_<name>, outbox_messages and outbox_inbox by
// default.
func optionsConfig(o *backend.DatabaseOptions) *Config {
	opts := o.WithDefaults()
	return &Config{
		Table:        opts.Schema + "_" + opts.Table,
		InboxTable:   opts.Schema + "_inbox",
		ClaimTimeout: opts.ClaimTimeout,
		Logger:       opts.Logger,
	}
}

// openURL opens the file a sqlite: URL names. Unless o.Create, a file that
// does not exist is an error naming it, and nothing is created.
func openURL(_ context.Context, raw string, o *backend.DatabaseOptions) (backend.DB, error) {
	cfg := optionsConfig(o)
	if _, err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	path, err := urlPath(raw)
	if err != nil {
		return nil, err
	}
	create := o != nil && o.Create
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		// Open creates it.
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("SQLite database %s does not exist: run `outbox migrate` to create it", path)
	case err != nil:
		return nil, fmt.Errorf("SQLite database %s: %w", path, err)
	case st.IsDir():
		return nil, fmt.Errorf("SQLite database %s is a directory", path)
	}
	sdb, err := Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open SQLite database %s: %s", path, redact.Text(err.Error()))
	}
	d, err := New(sdb, cfg)
	if err != nil {
		_ = sdb.Close()
		return nil, err
	}
	return registered{d: d, db: sdb}, nil
}

// registered is a database opened by URL, as tools see it.
type registered struct {
	d  *DB
	db *sql.DB
}

func (r registered) Store() stores.Store                   { return r.d.Store() }
func (r registered) Table() string                         { return r.d.cfg.Table }
func (r registered) CheckSchema(ctx context.Context) error { return r.d.Store().CheckSchema(ctx) }
func (r registered) Migrate(ctx context.Context) error     { return r.d.Migrate(ctx) }
func (r registered) SchemaVersions(ctx context.Context) ([]stores.SchemaVersion, error) {
	return r.d.SchemaVersions(ctx)
}
func (r registered) Close() error { return r.db.Close() }
