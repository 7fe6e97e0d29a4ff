package storetest

import (
	"testing"
	"time"
)

// testMigrateLetsWritersThrough: a migration step that must wait for a
// table another transaction is using does not hold the application's
// writes behind it for as long as that transaction lasts (the writes queue
// behind a waiting ALTER TABLE or CREATE INDEX), and applies the step once
// the table is free.
func testMigrateLetsWritersThrough(t *testing.T, h Harness) {
	if h.StepBack == nil || h.Begin == nil {
		t.Skip("the backend's migrations never wait behind a writer")
	}
	ctx := ctxT(t)
	if err := h.StepBack(ctx); err != nil {
		t.Fatalf("step back: %v", err)
	}
	// A writer's transaction, left open, holds the table.
	held := msgs("held", 1)
	tx, err := h.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := tx.Enqueue(ctx, held...); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- h.Store.Migrate(ctx) }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		waits, err := h.MigrationWaits(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if waits {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the migration to wait for the table")
		}
	}
	// Another writer commits while the migration waits: ctxT's deadline
	// (a minute) fails the case if it waits behind the migration until
	// the transaction above ends.
	passed := msgs("passed", 1)
	if err := h.Enqueue(ctx, passed, true); err != nil {
		t.Fatalf("an enqueue while the migration waits: %v (writers wait behind the migration)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Migrate once the table was free: %v", err)
	}
	b := claim(t, h.Store, 10, t0.Add(time.Hour))
	if !sameIDs(b.Records(), passed...) {
		t.Fatalf("claimed %v, want the event committed while the migration waited (%v)", ids(b.Records()), passed[0].ID)
	}
}
