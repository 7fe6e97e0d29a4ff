package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestDiscardedConnectionClosesItsStatementsFirst: when a write
// transaction's ROLLBACK fails, its connection is discarded from the pool;
// its prepared statements must be closed before that, since database/sql
// does not track a *sql.Conn's statements and one closed afterwards
// finalized on a freed handle (a SIGSEGV in sqlite3_finalize that killed a
// CI run under load).
func TestDiscardedConnectionClosesItsStatementsFirst(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	const q = "INSERT INTO t (x) VALUES (1)"
	fail := errors.New("the work failed")
	for range 3 { // each round discards a connection
		err = immediate(ctx, db, wait{until: time.Now().Add(time.Minute), prepare: []string{q}}, func(ctx context.Context, tx *wtx) error {
			if _, err := tx.exec(ctx, q); err != nil {
				return err
			}
			// End the transaction here, so that immediate's ROLLBACK
			// fails ("no transaction is active").
			if _, err := tx.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				return err
			}
			return fail
		})
		if !errors.Is(err, fail) {
			t.Fatalf("immediate = %v, want the work's error", err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after three rolled-back rounds: %d rows, %v", n, err)
	}
}
