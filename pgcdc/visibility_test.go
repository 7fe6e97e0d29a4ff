package pgcdc_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxgo/outbox"
)

// The log may carry a transaction before it is visible to other sessions:
// here its commit waits for a synchronous standby that never answers. The
// relay publishes the event, but marks its row only once the transaction
// is visible — never taking the row it cannot see yet for one marked.
func TestCommitSeenInTheLogBeforeItIsVisible(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.ConnString += "&synchronous_commit=local" // the relay's own writes wait for no standby
	r := e.start(cfg, e.publisher())
	exec := func(sql string) {
		t.Helper()
		if _, err := e.pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER SYSTEM SET synchronous_standby_names = 'nobody'`)
	exec(`SELECT pg_reload_conf()`)
	t.Cleanup(func() {
		_, _ = e.pool.Exec(ctx, `ALTER SYSTEM RESET synchronous_standby_names`)
		_, _ = e.pool.Exec(ctx, `SELECT pg_reload_conf()`)
	})
	conn, err := pgx.Connect(ctx, cluster.url(e.name+"_app"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	m := msg("k")
	committed := make(chan error, 1)
	go func() {
		tx, err := conn.Begin(ctx)
		if err == nil {
			err = e.db.InsertTx(ctx, tx, []outbox.Message{m})
		}
		if err == nil {
			err = tx.Commit(ctx) // waits for the standby
		}
		committed <- err
	}()
	e.read(1)
	after := e.currentLSN()
	if n := e.count(0); n != 0 {
		t.Fatalf("the row is visible already (%d): the commit did not wait", n)
	}
	e.waitFor("the marker finds the row not visible yet", 30*time.Second, func() bool { return r.Stats().Unseen > 0 })
	if e.confirmed() >= after {
		t.Fatal("the slot was confirmed past a transaction whose row is not marked")
	}
	exec(`SELECT pg_cancel_backend(` + strconv.Itoa(pid) + `)`) // the commit returns, committed locally
	if err := <-committed; err != nil {
		t.Logf("commit: %v", err)
	}
	e.waitFor("the row visible and then marked", 30*time.Second, func() bool {
		var n int
		_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM `+e.table+` WHERE id = $1`, m.ID).Scan(&n)
		return n == 0
	})
}
