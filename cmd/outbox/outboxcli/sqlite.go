package outboxcli

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/sqlite"
)

// sqliteForms lists the SQLite URL forms, for messages and help.
const sqliteForms = "sqlite:///abs/path.db, sqlite:/abs/path.db, sqlite://rel/path.db or sqlite:rel.db"

// sqlitePath is the file a sqlite: URL names:
//
//	sqlite:///abs/path.db  /abs/path.db
//	sqlite:/abs/path.db    /abs/path.db
//	sqlite://rel/path.db   rel/path.db (relative to the working directory)
//	sqlite:rel.db          rel.db
//
// %XX escapes are decoded. The URL takes no parameters: the store sets the
// connection's (see stores/sqlite.Open).
func sqlitePath(raw string) (string, error) {
	where := redact.URL(raw)
	rest, ok := strings.CutPrefix(raw, "sqlite:")
	if !ok {
		return "", fmt.Errorf("--database-url %s: not a sqlite: URL", where)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", fmt.Errorf("--database-url %s: SQLite URLs take no parameters (want %s)", where, sqliteForms)
	}
	if strings.HasPrefix(rest, "//") {
		rest = rest[2:] // sqlite:///abs → /abs; sqlite://rel → rel
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		return "", fmt.Errorf("--database-url %s: %v", where, err)
	}
	if p == "" || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("--database-url %s: no file (want %s)", where, sqliteForms)
	}
	return p, nil
}

// sqliteConfig maps the flags to SQLite, which has no schemas: the table is
// <schema>_<table>, outbox_messages by default.
func (g *globals) sqliteConfig() *sqlite.Config {
	return &sqlite.Config{Table: g.schema + "_" + g.table, ClaimTimeout: g.claimTimeout}
}

// openSQLite opens the file; unless mode is create, a file that does not
// exist is an error naming it, and nothing is created.
func (g *globals) openSQLite(where string, mode openMode) (*db, error) {
	cfg := g.sqliteConfig()
	if _, err := sqlite.SchemaSQL(cfg); err != nil {
		return nil, err
	}
	path, err := sqlitePath(g.databaseURL)
	if err != nil {
		return nil, err
	}
	if mode != create {
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("SQLite database %s does not exist: run `outbox migrate` to create it", path)
		case err != nil:
			return nil, fmt.Errorf("SQLite database %s: %w", path, err)
		case st.IsDir():
			return nil, fmt.Errorf("SQLite database %s is a directory", path)
		}
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
