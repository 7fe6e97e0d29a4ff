package inboxtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/stores"
)

// Migrate runs again on a table in use: it keeps the records.
func testMigrateIsIdempotent[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	m := msg()
	handle(t, f.in, m, nop[TTx])
	for range 2 {
		if err := f.Migrate(ctxT(t)); err != nil {
			t.Fatalf("Migrate again = %v", err)
		}
	}
	if o := handle(t, f.in, m, nop[TTx]); o != inbox.Duplicate {
		t.Fatalf("redelivery after Migrate = %v, want duplicate", o)
	}
	if o := handle(t, f.in, msg(), nop[TTx]); o != inbox.Handled {
		t.Fatalf("a new message after Migrate = %v, want handled", o)
	}
}

// The plain SQL file for goose, golang-migrate and atlas users is the
// template rendered with the defaults.
func testMigrationFile[TTx any](t *testing.T, h Harness[TTx]) {
	if h.SchemaSQL == nil {
		t.Skip("Harness.SchemaSQL is nil")
	}
	want, err := h.SchemaSQL("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("migrations/001_inbox.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("migrations/001_inbox.up.sql is stale; regenerate it from SchemaSQL(nil)")
	}
}

// Table names that are not plain identifiers, or too long, are refused
// before any SQL is built; a nil database too.
func testBadNames[TTx any](t *testing.T, h Harness[TTx]) {
	if h.New == nil {
		t.Skip("Harness.New is nil")
	}
	for _, name := range []string{`a"b`, "a`b", "x; DROP TABLE y", "1abc", "a b", strings.Repeat("a", 65)} {
		for i, err := range h.New(name) {
			if !errors.Is(err, stores.ErrBadIdentifier) {
				t.Errorf("constructor %d with table %q = %v, want ErrBadIdentifier", i, name, err)
			}
		}
		if h.SchemaSQL == nil {
			continue
		}
		if _, err := h.SchemaSQL(name); !errors.Is(err, stores.ErrBadIdentifier) {
			t.Errorf("SchemaSQL with table %q = %v, want ErrBadIdentifier", name, err)
		}
	}
	errs := h.New("")
	if len(errs) == 0 {
		t.Fatal("Harness.New returned no errors")
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("constructor %d with a nil database succeeded", i)
		}
	}
}

// Without the table, Handle and Purge say so (ErrSchemaMissing), and the
// handler does not run.
func testSchemaMissing[TTx any](t *testing.T, h Harness[TTx]) {
	if h.Unmigrated == nil {
		t.Skip("Harness.Unmigrated is nil")
	}
	in, err := inbox.New(h.Unmigrated(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	_, err = in.Handle(ctx, msg(), func(context.Context, TTx, inbox.Message) error {
		t.Error("the handler ran without the inbox table")
		return nil
	})
	if !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("Handle without the table = %v, want ErrSchemaMissing", err)
	}
	if _, err := in.Purge(ctx, time.Now(), 10); !errors.Is(err, inbox.ErrSchemaMissing) {
		t.Fatalf("Purge without the table = %v, want ErrSchemaMissing", err)
	}
}
