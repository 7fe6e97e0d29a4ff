package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"
)

// Open's connections wrap modernc.org/sqlite's for one thing: a write
// transaction begun with BeginTx waits for the write lock its turn, at the
// gate of its database file (see lock.go), instead of in busy_timeout's
// handler, where a writer may wait seconds under steady load and fail with
// SQLITE_BUSY though every transaction is short.

// connector makes Open's connections.
type connector struct {
	driver.Connector
	gate *gate
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if _, ok := dc.(interface {
		driver.ConnBeginTx
		driver.ConnPrepareContext
		driver.ExecerContext
		driver.QueryerContext
		driver.Pinger
		driver.SessionResetter
		driver.Validator
	}); !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("sqlite: the driver's connection (%T) lacks an interface Open forwards", dc)
	}
	return &openConn{Conn: dc, gate: c.gate}, nil
}

// openConn is one of Open's connections.
type openConn struct {
	driver.Conn
	gate *gate
}

// Unwrap returns the modernc.org/sqlite connection, for sql.Conn.Raw users
// (the convention modernc.org/sqlite's NewConnector documents).
func (c *openConn) Unwrap() driver.Conn { return c.Conn }

// BeginTx implements driver.ConnBeginTx. A read-only transaction begins at
// once (BEGIN DEFERRED). Any other waits at the gate, then tries for the
// write lock (BEGIN IMMEDIATE, from _txlock=immediate) until it holds it,
// for at most the connection's busy_timeout in all; it then fails,
// wrapping the SQLITE_BUSY error (or the gate's timeout, errLockTimeout).
func (c *openConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	}
	ex := c.Conn.(driver.ExecerContext)
	bg := context.WithoutCancel(ctx)
	timeout, err := c.busyTimeout(bg)
	if err != nil {
		return nil, err
	}
	if _, err := ex.ExecContext(bg, "PRAGMA busy_timeout = 0", nil); err != nil {
		return nil, err
	}
	tx, err := c.begin(ctx, bg, opts, time.Now().Add(time.Duration(timeout)*time.Millisecond))
	if _, rerr := ex.ExecContext(bg, fmt.Sprintf("PRAGMA busy_timeout = %d", timeout), nil); rerr != nil {
		if err == nil {
			_ = tx.Rollback()
		}
		return nil, driver.ErrBadConn // its busy_timeout is wrong: the pool discards it
	}
	if err != nil {
		return nil, err
	}
	return &tx1{Tx: tx, g: c.gate}, nil
}

// busyTimeout reads the connection's busy_timeout, in milliseconds.
func (c *openConn) busyTimeout(ctx context.Context) (int64, error) {
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, "PRAGMA busy_timeout", nil)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		return 0, fmt.Errorf("PRAGMA busy_timeout: %w", err)
	}
	n, ok := v[0].(int64)
	if !ok {
		return 0, fmt.Errorf("PRAGMA busy_timeout: got %T", v[0])
	}
	return n, nil
}

// begin is BeginTx with busy_timeout off.
func (c *openConn) begin(ctx, bg context.Context, opts driver.TxOptions, deadline time.Time) (driver.Tx, error) {
	inner := c.Conn.(driver.ConnBeginTx)
	if _, err := c.gate.enter(ctx, deadline); err != nil {
		return nil, err
	}
	defer c.gate.leave()
	var tx driver.Tx
	err := pollLock(ctx, deadline, c.gate.released, func() (err error) {
		tx, err = inner.BeginTx(bg, opts)
		return err
	})
	return tx, err
}

// Begin implements driver.Conn (database/sql uses BeginTx).
func (c *openConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// The optional interfaces of modernc.org/sqlite's connections, forwarded.

func (c *openConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *openConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *openConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *openConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *openConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *openConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

// tx1 is a write transaction begun by openConn.BeginTx: when it ends, it
// tells the gate.
type tx1 struct {
	driver.Tx
	g *gate
}

func (t *tx1) Commit() error {
	defer t.g.release()
	return t.Tx.Commit()
}

func (t *tx1) Rollback() error {
	defer t.g.release()
	return t.Tx.Rollback()
}
