package sqlite_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// shortBusy opens a store on a one-connection handle of its own whose
// busy_timeout is 50ms, far shorter than the holds below: a store that
// relied on busy_timeout would fail with SQLITE_BUSY.
func shortBusy(t *testing.T, path string, cfg *sqlite.Config) (*sql.DB, *sqlite.Store) {
	t.Helper()
	db := open(t, path)
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("PRAGMA busy_timeout = 50"); err != nil {
		t.Fatal(err)
	}
	d, err := sqlite.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return db, d.Store()
}

// hold takes the write lock on a handle of its own (another writer, as in
// another process) and returns a function that releases it.
func hold(t *testing.T, path string) (release func()) {
	t.Helper()
	tx, err := open(t, path).BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Commit(); err != nil {
			t.Error(err)
		}
	}
}

// await fails the test unless done is closed within a generous deadline:
// the calls under test end by themselves well before it.
func await(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return within a minute", what)
	}
}

// A Complete that finds the write lock taken waits for it, past the
// connection's busy_timeout, within its lease: it does not fail and give
// the batch back to be published again. The connection's settings are as
// they were afterwards.
func TestCompleteWaitsForTheLock(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(3), true); err != nil {
		t.Fatal(err)
	}
	db, s := shortBusy(t, b.path, nil)
	now := t0.Add(time.Hour)
	batch := mustClaim(t, s, 10, now)
	release := hold(t, b.path)
	go func() {
		time.Sleep(300 * time.Millisecond) // six busy timeouts
		release()
	}()
	if err := batch.Complete(ctx, stores.Outcome{Now: now, Published: ids(batch)}); err != nil {
		t.Fatalf("Complete while another writer held the lock for a while: %v", err)
	}
	if st := stats(t, b.store); st.Pending != 0 || st.Published != 3 {
		t.Fatalf("after Complete: %+v, want 3 published", st)
	}
	for pragma, want := range map[string]string{"busy_timeout": "50", "synchronous": "2"} {
		var got string
		if err := db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil || got != want {
			t.Errorf("after the store's transactions, PRAGMA %s = %q (err %v), want %q as before", pragma, got, err, want)
		}
	}
}

// A claim waits for the write lock past busy_timeout too.
func TestClaimWaitsForTheLock(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(3), true); err != nil {
		t.Fatal(err)
	}
	_, s := shortBusy(t, b.path, nil)
	release := hold(t, b.path)
	go func() {
		time.Sleep(300 * time.Millisecond)
		release()
	}()
	batch, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: t0.Add(time.Hour)})
	if err != nil {
		t.Fatalf("Claim while another writer held the lock for a while: %v", err)
	}
	if n := len(batch.Records()); n != 3 {
		t.Fatalf("claimed %d, want 3", n)
	}
}

// A Complete that cannot get the lock before its lease ends fails, saying
// so, and applies nothing; the records are claimable again.
func TestCompleteGivesUpAtLeaseEnd(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if err := b.enqueue(ctx, testMsgs(3), true); err != nil {
		t.Fatal(err)
	}
	_, s := shortBusy(t, b.path, &sqlite.Config{ClaimTimeout: 300 * time.Millisecond})
	batch := mustClaim(t, s, 10, time.Now())
	release := hold(t, b.path) // until Complete gives up
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = batch.Complete(ctx, stores.Outcome{Now: time.Now(), Published: ids(batch)})
	}()
	await(t, "Complete", done)
	release()
	if err == nil || !strings.Contains(err.Error(), "lease ended") {
		t.Fatalf("Complete with the lock taken for its whole lease: %v, want an error saying the lease ended", err)
	}
	if st := stats(t, b.store); st.Pending != 3 {
		t.Fatalf("after a failed Complete: %+v, want 3 pending", st)
	}
	if err := batch.Abort(ctx); err != nil {
		t.Fatalf("Abort after the lease ended: %v", err)
	}
	again := mustClaim(t, s, 10, time.Now().Add(time.Second))
	if n := len(again.Records()); n != 3 {
		t.Fatalf("after the lease ended, claimed %d, want 3", n)
	}
}

// Open's connections hand sql.Conn.Raw users modernc.org/sqlite's through
// Unwrap.
func TestOpenUnwrap(t *testing.T) {
	b := setup(t)
	c, err := b.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Raw(func(dc any) error {
		u, ok := dc.(interface{ Unwrap() driver.Conn })
		if !ok {
			t.Fatalf("Raw gives %T, without Unwrap", dc)
		}
		if _, ok := u.Unwrap().(interface{ Serialize() ([]byte, error) }); !ok {
			t.Errorf("Unwrap gives %T, not modernc.org/sqlite's connection", u.Unwrap())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BeginTx on a handle from Open waits for the write lock until its context
// ends, and leaves the connection's busy_timeout as it was.
func TestBeginTxHonoursContext(t *testing.T) {
	b := setup(t)
	release := hold(t, b.path)
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	db := open(t, b.path)
	db.SetMaxOpenConns(1)
	if tx, err := db.BeginTx(ctx, nil); err == nil {
		_ = tx.Rollback()
		t.Fatal("BeginTx got the lock another writer holds")
	}
	var got int
	if err := db.QueryRow("PRAGMA busy_timeout").Scan(&got); err != nil || got != 30000 {
		t.Errorf("after BeginTx gave up, PRAGMA busy_timeout = %d (err %v), want 30000", got, err)
	}
}
