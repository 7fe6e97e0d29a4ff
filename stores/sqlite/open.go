package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// DriverName is the database/sql driver Open uses: modernc.org/sqlite, pure
// Go, no cgo.
const DriverName = "sqlite"

// DSN returns the modernc.org/sqlite data source name Open uses for the
// database file at path: a file: URI with the connection settings that the
// outbox needs (see the package documentation, "Connection settings").
// Append your own parameters with "&".
func DSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: %w", err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	q := "_pragma=busy_timeout(5000)" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)" +
		"&_pragma=foreign_keys(ON)" +
		"&_txlock=immediate"
	// file:/abs/path, not file:///abs/path: both are valid SQLite URIs.
	return "file:" + u.EscapedPath() + "?" + q, nil
}

// Open opens (creating it if need be) the SQLite database file at path
// through modernc.org/sqlite, with WAL, a 5s busy timeout, synchronous=FULL,
// foreign keys on, and write transactions from BeginTx that take the write
// lock at BEGIN (_txlock=immediate). The caller closes the handle.
func Open(path string) (*sql.DB, error) {
	dsn, err := DSN(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(DriverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := db.PingContext(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}
