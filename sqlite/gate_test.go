package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// Writers of one process on handles from Open get the write lock in the
// order they asked for it: a writer that began waiting first does not lose
// its turn to one that came later (with SQLite's busy handler alone, the
// later one, whose sleeps are still short, usually wins).
func TestGateServesInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gate.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := Open(path) // another handle on the same file: the same queue
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	holder, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	g := gateFor(abs)
	order := make(chan string, 2)
	writer := func(name string, on *sql.DB) {
		go func() {
			tx, err := on.BeginTx(ctx, nil)
			if err != nil {
				order <- name + ": " + err.Error()
				return
			}
			order <- name
			_ = tx.Commit()
		}()
	}
	writer("first", db)
	deadline := time.Now().Add(time.Minute)
	for len(g.head) == 0 { // the first writer is at the head of the queue
		if time.Now().After(deadline) {
			t.Fatal("the first writer never reached the gate")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the first writer's wait grows old
	writer("second", other)
	time.Sleep(100 * time.Millisecond) // the second one is waiting too
	if err := holder.Commit(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		select {
		case s := <-order:
			got = append(got, s)
		case <-time.After(time.Minute):
			t.Fatalf("writers did not get the lock within a minute: %v", got)
		}
	}
	if got[0] != "first" || got[1] != "second" {
		t.Fatalf("writers got the lock in the order %v, want [first second]", got)
	}
}
