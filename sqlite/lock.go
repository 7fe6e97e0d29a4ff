package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Waiting for the write lock.
//
// SQLite keeps no queue for its one write lock. A connection that finds it
// taken gets SQLITE_BUSY, and the busy handler that busy_timeout installs
// sleeps and tries again: 1, 2, 5, 10 … ms, then 100 ms at a time. Under a
// steady stream of writers such a waiter finds the lock free only by luck,
// since the writer that just committed begins again within microseconds
// while the waiter sleeps: a relay's claim or completion could wait for
// seconds, and fail when busy_timeout ran out, while writers committed
// thousands of transactions; and so could a writer.
//
// So the store's write transactions, and those begun with BeginTx on a
// handle from Open, do not rely on the busy handler. The waiters of one
// process first queue at a gate, in arrival order (a Go channel serves its
// waiters first come, first served): one gate per database file for
// handles from Open, one per Store otherwise. Only the waiter at the head
// tries for the lock: with busy_timeout off, it tries BEGIN IMMEDIATE
// itself every lockPollMin to lockPollMax (jittered, so processes do not
// try in step; Go's timers wake about a millisecond late at best, so in
// practice about once a millisecond), and at once when a write transaction
// of its process ends. It leaves the gate as soon as it holds the lock, so
// the next waiter is already trying while the first commits (and
// checkpoints, if its commit does). Between processes, each try lands in
// one of the gaps between other writers' transactions with a fair chance:
// a relay process gets the lock within milliseconds even while writers of
// another process keep it busy, and they get it back within about a
// millisecond of its commit. A failed try touches no page, so waiting
// costs little CPU. (Trying more often, every 100µs, was measured: the
// relays then take the lock for smaller batches, more often, and the
// writers commit less.)
//
// Every wait has a deadline: the lease's end for a completion, half a
// lease (or ctx's end) for a claim, busy_timeout for a writer's BeginTx.
const (
	lockPollMin = 200 * time.Microsecond
	lockPollMax = 1 * time.Millisecond
)

// maxLockWait bounds the wait for the write lock of a call that has no lease
// to keep and whose context has no deadline (Migrate, Purge).
const maxLockWait = 30 * time.Second

// errLockTimeout says the write lock stayed taken until the deadline.
var errLockTimeout = errors.New("the write lock stayed taken by other writers")

// wait says how a write transaction waits for the lock.
type wait struct {
	// until is when it gives up (sooner if ctx ends).
	until time.Time
	// gate is where it queues when the connection is not one of Open's
	// (which queue at their file's gate).
	gate *gate
	// skip, if set, runs before the gate, and again once through it if
	// that took a wait: true means there is nothing to do, and no
	// transaction begins.
	skip func(ctx context.Context, tx *wtx) (bool, error)
	// prepare lists the statements to prepare before the wait (after the
	// first skip): SQLite parses and plans them without holding the lock
	// (the claim's key walk takes longer to plan than to run).
	prepare []string
}

// wtx is the connection of a write transaction, with the statements
// prepared for it.
type wtx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// bad says the connection must not go back to the pool (see end).
	bad bool
}

// prepare prepares qs on the connection, for exec, query and queryRow.
func (t *wtx) prepare(ctx context.Context, qs []string) error {
	for _, q := range qs {
		st, err := t.conn.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		t.stmts[q] = st
	}
	return nil
}

// end closes the prepared statements, then the connection — discarding
// it from the pool when bad. The statements must go first: database/sql
// does not track a *sql.Conn's statements, so one closed after its
// connection would finalize on a freed handle (a crash in modernc's
// sqlite3_finalize, seen under load).
func (t *wtx) end() {
	for q, st := range t.stmts {
		_ = st.Close()
		delete(t.stmts, q)
	}
	if t.bad {
		badConn(t.conn)
	}
	_ = t.conn.Close()
}

func (t *wtx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmts[query]; st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.conn.ExecContext(ctx, query, args...)
}

func (t *wtx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmts[query]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}

func (t *wtx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmts[query]; st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.conn.QueryContext(ctx, query, args...)
}

// errSkipped is immediate's error when w.skip said there was nothing to do.
var errSkipped = errors.New("nothing to do")

// immediate runs f inside BEGIN IMMEDIATE … COMMIT on one connection of db,
// waiting for the write lock as w says. IMMEDIATE takes SQLite's write lock
// at BEGIN, so f never fails halfway for want of the lock, whatever _txlock
// the caller's DSN sets. f must be short: every writer on the database
// waits for it. When w.skip says there is nothing to do, immediate returns
// errSkipped and f does not run.
func immediate(ctx context.Context, db *sql.DB, w wait, f func(ctx context.Context, tx *wtx) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	tx := &wtx{conn: conn, stmts: make(map[string]*sql.Stmt, len(w.prepare))}
	defer tx.end()
	g := w.gate
	if og := openGate(conn); og != nil {
		g = og
	}
	if err := enterAndBegin(ctx, tx, g, w); err != nil {
		return err
	}
	if g != nil {
		defer g.release()
	}
	if err = f(ctx, tx); err == nil {
		// The work is done: commit it even if ctx ended meanwhile.
		if _, err = conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err == nil {
			return nil
		}
	}
	if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
		// SQLite may have rolled back by itself already; if not, the
		// connection is still in a transaction. Either way, do not give
		// it back to the pool (end does that).
		tx.bad = true
	}
	return err
}

// enterAndBegin runs w.skip, passes g (if not nil), and begins an IMMEDIATE
// transaction on tx.conn.
func enterAndBegin(ctx context.Context, tx *wtx, g *gate, w wait) error {
	deadline := w.until
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	skip := func() error {
		if w.skip == nil {
			return nil
		}
		skip, err := w.skip(ctx, tx)
		if err == nil && skip {
			err = errSkipped
		}
		return err
	}
	if err := skip(); err != nil {
		return err
	}
	if err := tx.prepare(ctx, w.prepare); err != nil {
		return err
	}
	var released <-chan struct{}
	if g != nil {
		waited, err := g.enter(ctx, deadline)
		if err != nil {
			return err
		}
		defer g.leave()
		if waited {
			if err := skip(); err != nil {
				return err
			}
		}
		released = g.released
	}
	return beginImmediate(ctx, tx, deadline, released)
}

// openGate is the gate of conn's file when conn is one of Open's, else nil.
func openGate(conn *sql.Conn) *gate {
	var g *gate
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*openConn); ok {
			g = c.gate
		}
		return nil
	})
	return g
}

// beginImmediate begins an IMMEDIATE transaction on conn, trying until it
// holds the write lock, deadline passes or ctx ends (see pollLock). It
// leaves the connection's busy_timeout as it found it.
func beginImmediate(ctx context.Context, tx *wtx, deadline time.Time, released <-chan struct{}) error {
	conn := tx.conn
	// The tries run without ctx (the loop watches it), so that the driver
	// does not start a goroutine to watch ctx on each.
	bg := context.WithoutCancel(ctx)
	var timeout int64
	if err := conn.QueryRowContext(bg, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
		return err
	}
	if _, err := conn.ExecContext(bg, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	err := pollLock(ctx, deadline, released, func() error {
		_, err := conn.ExecContext(bg, "BEGIN IMMEDIATE")
		return err
	})
	if _, rerr := conn.ExecContext(bg, fmt.Sprintf("PRAGMA busy_timeout = %d", timeout)); rerr != nil {
		if err == nil {
			_, _ = conn.ExecContext(bg, "ROLLBACK")
			err = rerr
		}
		tx.bad = true // its busy_timeout is wrong: do not give it back
	}
	return err
}

// pollLock calls try, which begins an IMMEDIATE transaction without waiting,
// until it succeeds or fails with an error other than SQLITE_BUSY, deadline
// passes or ctx ends. Between tries it sleeps lockPollMin to lockPollMax, or
// until a receive from released, if that comes first.
func pollLock(ctx context.Context, deadline time.Time, released <-chan struct{}, try func() error) error {
	start := time.Now()
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for tries := 1; ; tries++ {
		err := try()
		if err == nil || !isBusy(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for the write lock: %w (%w)", ctx.Err(), err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w for %v (%d tries): %w", errLockTimeout, time.Since(start).Round(time.Millisecond), tries, err)
		}
		d := lockPollMin + rand.N(lockPollMax-lockPollMin)
		if t == nil {
			t = time.NewTimer(d)
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-released:
		case <-ctx.Done():
		}
	}
}

// isBusy reports whether err is SQLITE_BUSY (or one of its extended
// codes): the lock is taken, try again. modernc.org/sqlite's errors carry
// the code; other drivers' messages say "database is locked".
func isBusy(err error) bool {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		return c.Code()&0xff == 5 // SQLITE_BUSY
	}
	return strings.Contains(err.Error(), "database is locked")
}

// badConn makes the pool discard conn when it is closed.
func badConn(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}
