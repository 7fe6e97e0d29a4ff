package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	msqlite "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// DriverName is the database/sql driver Open uses: modernc.org/sqlite, pure
// Go, no cgo.
const DriverName = "sqlite"

// busyTimeout is the busy_timeout Open and DSN set, and how long a write
// transaction begun on a handle from Open waits for the write lock. Writers
// of other processes compete for the lock by luck (the queue is per
// process), and on a loaded machine a writer lost 5 s of tries to four
// relay processes: 30 s rides out such a spell; a write transaction waits,
// it does not fail.
const busyTimeout = 30 * time.Second

// DSN returns the modernc.org/sqlite data source name Open uses for the
// database file at path: a file: URI with the connection settings that the
// outbox needs (see the package documentation, "Connection settings").
// Append your own parameters with "&".
func DSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: %w", err)
	}
	return dsn(abs), nil
}

func dsn(abs string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	q := "_pragma=busy_timeout(" + strconv.FormatInt(busyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(FULL)" +
		"&_pragma=foreign_keys(ON)" +
		"&_txlock=immediate"
	// file:/abs/path, not file:///abs/path: both are valid SQLite URIs.
	return "file:" + u.EscapedPath() + "?" + q
}

// Open opens (creating it if need be) the SQLite database file at path
// through modernc.org/sqlite, with WAL, a 5s busy timeout, synchronous=FULL,
// foreign keys on, and write transactions from BeginTx that take the write
// lock at BEGIN (_txlock=immediate) and wait for it their turn: the write
// transactions of one process, on every handle Open returns for the file,
// queue in arrival order, and the one at the head of the queue tries for the
// lock about once a millisecond (at once when a transaction of the process
// ends), for at most the busy timeout in all; it then fails wrapping
// SQLITE_BUSY (see the package documentation, "Writers"). The caller closes
// the handle.
//
// sql.Conn.Raw hands over Open's own connection type; its Unwrap method
// returns modernc.org/sqlite's.
func Open(path string) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	c, err := msqlite.NewConnector(dsn(abs))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db := sql.OpenDB(connector{Connector: c, gate: gateFor(abs)})
	if err := db.PingContext(context.Background()); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}
