package mysql

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/stores"
)

func migrated(t *testing.T, cfg *Config) (*sql.DB, *Store) {
	t.Helper()
	// The stalled claims' connections die on purpose: keep the driver quiet.
	db := mysqltest.NewDatabase(t)(func(c *mysql.Config) { c.Logger = &mysql.NopLogger{} })
	d, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Store()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]outbox.Message, 3)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "orders", CreatedAt: time.Now()}
	}
	if err := d.InsertTx(context.Background(), tx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return db, s
}

// A relay that stalls while holding a claim loses it after ClaimTimeout: the
// server kills its connection, the rows go to the next claim, and the
// stalled relay's Complete fails instead of marking rows it no longer holds.
// MariaDB does it with idle_transaction_timeout; the wait_timeout case is
// what MySQL gets, run here on MariaDB.
func TestStalledClaimIsReleased(t *testing.T) {
	for _, c := range []struct {
		name   string
		flavor *flavor // nil: detect
	}{
		{"detected", nil},
		{"wait_timeout", &flavor{name: "MySQL-like", isolation: "tx_isolation", idle: "wait_timeout"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := &Config{ClaimTimeout: time.Second}
			_, s := migrated(t, cfg)
			if c.flavor != nil {
				s.sess.Store(c.flavor.session(cfg.ClaimTimeout))
			}
			ctx := context.Background()
			now := time.Now().Add(time.Hour)
			start := time.Now()
			stalled, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(stalled.Records()) != 3 {
				t.Fatalf("claimed %d, want 3", len(stalled.Records()))
			}
			if c.flavor == nil {
				t.Logf("server: %s", s.sess.Load().flavor.name)
			}
			var got int
			for got == 0 {
				if time.Since(start) > 15*time.Second {
					t.Fatal("the stalled claim still holds its rows after 15s")
				}
				b, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now})
				if err != nil {
					t.Fatal(err)
				}
				got = len(b.Records())
				if got > 0 {
					if err := b.Complete(ctx, stores.Outcome{Now: now, Published: ids(b.Records())}); err != nil {
						t.Fatal(err)
					}
				} else {
					time.Sleep(50 * time.Millisecond) // waiting on the server's timer
				}
			}
			if d := time.Since(start); got != 3 || d < 900*time.Millisecond {
				t.Fatalf("took over %d rows after %v; want 3, after the 1s timeout", got, d)
			}
			if err := stalled.Complete(ctx, stores.Outcome{Now: now, Published: ids(stalled.Records())}); err == nil {
				t.Fatal("the stalled relay's Complete succeeded after losing its claim")
			}
			_ = stalled.Abort(ctx)
		})
	}
}

// The claim's session settings hold inside the claim only: the connection
// goes back to the pool as it came.
func TestClaimRestoresSession(t *testing.T) {
	t.Parallel()
	db, s := migrated(t, nil)
	db.SetMaxOpenConns(1) // every statement below runs on the claim's connection
	ctx := context.Background()
	vars := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var iso string
		var idle, lock int
		err := q.QueryRowContext(ctx, `SELECT @@SESSION.tx_isolation, @@SESSION.idle_transaction_timeout, @@SESSION.innodb_lock_wait_timeout`).Scan(&iso, &idle, &lock)
		if err != nil {
			t.Fatal(err)
		}
		return iso + " " + time.Duration(idle*int(time.Second)).String() + " " + time.Duration(lock*int(time.Second)).String()
	}
	if _, err := db.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 7`); err != nil {
		t.Fatal(err)
	}
	before := vars(db)
	now := time.Now().Add(time.Hour)
	for _, end := range []string{"abort", "complete", "empty"} {
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if end != "empty" {
			if got, want := vars(b.(*batch).tx), "READ-COMMITTED 30s 5s"; got != want {
				t.Errorf("inside the claim: %s, want %s", got, want)
			}
		}
		switch end {
		case "abort":
			err = b.Abort(ctx)
		case "complete":
			err = b.Complete(ctx, stores.Outcome{Now: now, Published: ids(b.Records())})
		case "empty":
			if len(b.Records()) != 0 {
				t.Fatalf("claimed %d, want none left", len(b.Records()))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if after := vars(db); after != before {
			t.Errorf("after %s: session %s, want %s as before", end, after, before)
		}
	}
}

func ids(recs []stores.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// share fills room evenly, and what a short list leaves goes to the others.
func TestShare(t *testing.T) {
	l := func(n int) []uint64 { return make([]uint64, n) }
	for _, c := range []struct {
		lists [][]uint64
		room  int
		want  []int
	}{
		{[][]uint64{l(10), l(10)}, 10, []int{5, 5}},
		{[][]uint64{l(1), l(10), l(0), l(10)}, 10, []int{1, 5, 0, 4}},
		{[][]uint64{l(2), l(2)}, 10, []int{2, 2}},
		{[][]uint64{l(3), l(3), l(3)}, 2, []int{1, 1, 0}},
		{[][]uint64{l(9)}, 4, []int{4}},
		{nil, 5, []int{}},
	} {
		if got := share(c.lists, c.room); !slices.Equal(got, c.want) {
			t.Errorf("share(%d lists, room %d) = %v, want %v", len(c.lists), c.room, got, c.want)
		}
	}
}
