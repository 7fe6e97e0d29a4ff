package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/inbox/inboxtest"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
)

func nop(context.Context, *sql.Tx, inbox.Message) error { return nil }

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
	drv := newInbox(t, db, nil, true)
	ctx := context.Background()
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, plus5) // 00:06:07.123456 UTC
	in, err := inbox.New(drv, &inbox.Config{Clock: clocktest.New(at)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(ctx, inbox.Message{ID: outbox.NewID(), Topic: "orders"}, nop); err != nil {
		t.Fatal(err)
	}
	got := inboxtest.Query(t, open(), `SELECT CAST(received_at AS CHAR) FROM outbox_inbox`, inboxtest.ScanString)
	if fmt.Sprint(got) != "[2026-03-04 00:06:07.123456]" {
		t.Fatalf("received_at %v, want [2026-03-04 00:06:07.123456] (UTC, truncated to µs)", got)
	}
	if n, err := in.Purge(ctx, at.Truncate(time.Microsecond), 10); err != nil || n != 0 {
		t.Fatalf("Purge at the record's own time = %d, %v; want 0", n, err)
	}
	if n, err := in.Purge(ctx, at.In(time.UTC).Add(time.Microsecond), 10); err != nil || n != 1 {
		t.Fatalf("Purge just after the record = %d, %v; want 1", n, err)
	}
}

// A topic the column cannot take as it is (invalid UTF-8) is stored
// cleaned up rather than failing the message.
func TestInvalidUTF8TopicIsCleanedUp(t *testing.T) {
	t.Parallel()
	db := mysqltest.Open(t)
	in, err := inbox.New(newInbox(t, db, nil, true), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Handle(context.Background(), inbox.Message{ID: outbox.NewID(), Topic: "a\xffb"}, nop); err != nil {
		t.Fatal(err)
	}
	if got := inboxtest.Query(t, db, `SELECT topic FROM outbox_inbox`, inboxtest.ScanString); fmt.Sprint(got) != "[a\uFFFDb]" {
		t.Fatalf("topics %q, want [a\uFFFDb]", got)
	}
}
