package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// A claim runs on its own connection, with session settings that hold only
// while it does:
//
//   - READ COMMITTED, so that the claim's locking read takes record locks
//     only: under REPEATABLE READ it would also lock the gap after the last
//     pending row, and every Enqueue would wait for the relay to finish
//     publishing.
//   - innodb_lock_wait_timeout = min(ClaimTimeout, claimLockWait): nothing in
//     a claim should wait for a row lock (it skips locked rows, then writes
//     rows it holds), so a wait is cut short rather than stretching the claim.
//   - an idle timeout of ClaimTimeout that kills the connection of a relay
//     that stalls while holding the claim: the server then rolls the claim
//     back and its rows go to another relay. MariaDB has
//     idle_transaction_timeout; MySQL has no idle-in-transaction timeout, so
//     it gets wait_timeout, which the server applies to any idle
//     connection, in a transaction or not.
//
// The same statement saves the session's values in user variables, and the
// claim puts them back before the connection returns to the pool, so that
// the application's own transactions on the same *sql.DB are unaffected. A
// connection whose values could not be restored is closed, not pooled.

// claimLockWait caps the claim session's innodb_lock_wait_timeout.
const claimLockWait = 5 * time.Second

// releaseTimeout bounds the statements that end a claim (rollback, restore)
// when the caller's context is already done.
const releaseTimeout = 10 * time.Second

// flavor names the session variables of one server family.
type flavor struct {
	name      string
	isolation string // the session's isolation level
	idle      string // the timeout that kills a stalled claim
}

var (
	flavorMariaDB = flavor{name: "MariaDB", isolation: "tx_isolation", idle: "idle_transaction_timeout"}
	flavorMySQL   = flavor{name: "MySQL", isolation: "transaction_isolation", idle: "wait_timeout"}
)

// session is the pair of statements that set up a claim's connection and
// restore it.
type session struct {
	flavor       flavor
	set, restore string
}

func (f flavor) session(claimTimeout time.Duration) *session {
	idle := seconds(claimTimeout)
	lock := seconds(min(claimTimeout, claimLockWait))
	return &session{
		flavor: f,
		// The server evaluates every right-hand side before it assigns
		// anything, so the user variables get the values from before.
		set: fmt.Sprintf("SET @outbox_isolation = @@SESSION.%[1]s, @outbox_idle = @@SESSION.%[2]s, "+
			"@outbox_lock_wait = @@SESSION.innodb_lock_wait_timeout, "+
			"SESSION %[1]s = 'READ-COMMITTED', SESSION %[2]s = %[3]d, SESSION innodb_lock_wait_timeout = %[4]d",
			f.isolation, f.idle, idle, lock),
		restore: fmt.Sprintf("SET SESSION %[1]s = @outbox_isolation, SESSION %[2]s = @outbox_idle, "+
			"SESSION innodb_lock_wait_timeout = @outbox_lock_wait", f.isolation, f.idle),
	}
}

// session returns the claim session for the server, which it asks for its
// version the first time.
func (s *Store) session(ctx context.Context, conn *sql.Conn) (*session, error) {
	if se := s.sess.Load(); se != nil {
		return se, nil
	}
	var version string
	if err := conn.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return nil, err
	}
	f := flavorMySQL
	if strings.Contains(strings.ToLower(version), "mariadb") {
		f = flavorMariaDB
	}
	s.sess.CompareAndSwap(nil, f.session(s.cfg.ClaimTimeout))
	return s.sess.Load(), nil
}
