package mysqlinbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/mysqlinbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/mysqltest"
)

func TestPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := inbox.New(b.drv, &inbox.Config{Clock: b.clock, Retention: 24 * time.Hour, PurgeBatch: 2})
	var ids []inbox.Message
	for range 5 { // received at t0, t0+1h, …, t0+4h
		m := msg()
		ids = append(ids, m)
		if _, err := in.Handle(ctx, m, nop); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Hour)
	}
	t0 := b.clock.Now().Add(-5 * time.Hour)
	n, err := in.Purge(ctx, t0.Add(90*time.Minute), 10) // t0 and t0+1h
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2", n, err)
	}
	if n := b.records(t); n != 3 {
		t.Fatalf("%d records left, want 3", n)
	}
	// Purged: a duplicate of a purged message is no longer caught.
	if o, err := in.Handle(ctx, ids[0], nop); err != nil || o != inbox.Handled {
		t.Fatalf("redelivery after purge = %v, %v; want handled (the trade-off of the window)", o, err)
	}
	if o, err := in.Handle(ctx, ids[4], nop); err != nil || o != inbox.Duplicate {
		t.Fatalf("redelivery within the window = %v, %v; want duplicate", o, err)
	}
	// 28h30m after t0: everything older than 24h goes, in batches of 2.
	b.clock.Advance(t0.Add(28*time.Hour + 30*time.Minute).Sub(b.clock.Now()))
	n, err = in.PurgeExpired(ctx)
	if err != nil || n != 3 {
		t.Fatalf("PurgeExpired = %d, %v; want 3 (t0+2h…t0+4h)", n, err)
	}
	if n := b.records(t); n != 1 { // ids[0] again, received at t0+5h
		t.Fatalf("%d records left, want 1", n)
	}
	if n, err := in.Purge(ctx, t0.Add(100*time.Hour), 0); err != nil || n != 1 {
		t.Fatalf("Purge with the default batch = %d, %v; want 1", n, err)
	}
}

// Purge skips a record another transaction holds (here a duplicate
// delivery checking it, which takes a shared lock) instead of waiting for
// it, and so does a concurrent purge.
func TestPurgeSkipsLockedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := inbox.New(b.drv, &inbox.Config{Clock: b.clock})
	var ms []inbox.Message
	for range 3 {
		m := msg()
		ms = append(ms, m)
		if _, err := in.Handle(ctx, m, nop); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Second)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if inserted, err := in.RecordTx(ctx, tx, ms[0]); err != nil || inserted {
		t.Fatalf("RecordTx of the oldest = %v, %v; want a duplicate", inserted, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := in.Purge(pctx, b.clock.Now(), 10)
	if err != nil || n != 2 {
		t.Fatalf("Purge beside a held record = %d, %v; want 2 (the others)", n, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := in.Purge(ctx, b.clock.Now(), 10); err != nil || n != 1 {
		t.Fatalf("Purge once released = %d, %v; want 1", n, err)
	}
}

// Times are stored in UTC whatever the connection's loc and time_zone, so
// Purge cuts at the same instant for every application.
func TestTimesAreUTCWhateverTheDSN(t *testing.T) {
	t.Parallel()
	open := mysqltest.NewDatabase(t)
	plus5 := time.FixedZone("+05", 5*3600)
	db := open(func(c *mysqldrv.Config) {
		c.Loc = plus5
		c.ParseTime = false
		c.Params["time_zone"] = "'+05:00'"
	})
	drv, err := mysqlinbox.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := drv.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, plus5) // 00:06:07.123456 UTC
	in := inbox.New(drv, &inbox.Config{Clock: clocktest.New(at)})
	m := msg()
	if _, err := in.Handle(ctx, m, nop); err != nil {
		t.Fatal(err)
	}
	utcDB := open()
	if got := queryStrings(t, utcDB, `SELECT CAST(received_at AS CHAR) FROM outbox_inbox`); fmt.Sprint(got) != "[2026-03-04 00:06:07.123456]" {
		t.Fatalf("received_at %v, want [2026-03-04 00:06:07.123456] (UTC, truncated to µs)", got)
	}
	if n, err := in.Purge(ctx, at.Truncate(time.Microsecond), 10); err != nil || n != 0 {
		t.Fatalf("Purge at the record's own time = %d, %v; want 0", n, err)
	}
	if n, err := in.Purge(ctx, at.In(time.UTC).Add(time.Microsecond), 10); err != nil || n != 1 {
		t.Fatalf("Purge just after the record = %d, %v; want 1", n, err)
	}
}
