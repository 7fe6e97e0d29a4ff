package inboxtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox/inbox"
)

// receive handles n new messages, the clock advancing by step after each.
func (f fixture[TTx]) receive(t *testing.T, n int, step time.Duration) []inbox.Message {
	t.Helper()
	ms := make([]inbox.Message, n)
	for i := range ms {
		ms[i] = msg()
		handle(t, f.in, ms[i], nop[TTx])
		f.clock.Advance(step)
	}
	return ms
}

// recordIDs returns the IDs of the committed records.
func (f fixture[TTx]) recordIDs(t *testing.T) map[uuid.UUID]bool {
	t.Helper()
	ids := map[uuid.UUID]bool{}
	for _, r := range f.Records(t) {
		ids[r.ID] = true
	}
	return ids
}

// Purge deletes records received before its cut-off, oldest first and up
// to its limit; PurgeExpired deletes everything older than the retention,
// in batches. A duplicate of a purged message is no longer caught.
func testPurge[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{Retention: 24 * time.Hour, PurgeBatch: 2})
	ctx := ctxT(t)
	ms := f.receive(t, 5, time.Hour) // received at t0, t0+1h, …, t0+4h
	if n, err := f.in.Purge(ctx, t0.Add(90*time.Minute), 10); err != nil || n != 2 {
		t.Fatalf("Purge before t0+90m = %d, %v; want 2 (t0 and t0+1h)", n, err)
	}
	at := t0.Truncate(time.Microsecond).Add(2 * time.Hour) // the third record, as stored
	if n, err := f.in.Purge(ctx, at, 10); err != nil || n != 0 {
		t.Fatalf("Purge at a record's time = %d, %v; want 0 (the cut-off is exclusive)", n, err)
	}
	if n, err := f.in.Purge(ctx, at.Add(time.Microsecond), 10); err != nil || n != 1 {
		t.Fatalf("Purge a microsecond later = %d, %v; want 1", n, err)
	}
	if n, err := f.in.Purge(ctx, t0.Add(100*time.Hour), 1); err != nil || n != 1 {
		t.Fatalf("Purge with limit 1 = %d, %v; want 1", n, err)
	}
	if ids := f.recordIDs(t); len(ids) != 1 || !ids[ms[4].ID] {
		t.Fatalf("records %v left, want the newest, %s (oldest purged first)", ids, ms[4].ID)
	}
	// Purged: a duplicate of a purged message is no longer caught.
	if o := handle(t, f.in, ms[0], nop[TTx]); o != inbox.Handled {
		t.Fatalf("redelivery after purge = %v; want handled (the trade-off of the window)", o)
	}
	if o := handle(t, f.in, ms[4], nop[TTx]); o != inbox.Duplicate {
		t.Fatalf("redelivery within the window = %v; want duplicate", o)
	}
	// Records at t0+4h (ms[4]) and t0+5h (ms[0] again); then 3 more at
	// t0+5h…t0+7h. At t0+29h30m everything older than t0+5h30m goes, in
	// batches of 2: ms[4], ms[0] and the first new one.
	f.receive(t, 3, time.Hour)
	f.clock.Advance(t0.Add(29*time.Hour + 30*time.Minute).Sub(f.clock.Now()))
	if n, err := f.in.PurgeExpired(ctx); err != nil || n != 3 {
		t.Fatalf("PurgeExpired = %d, %v; want 3", n, err)
	}
	if r := len(f.Records(t)); r != 2 {
		t.Fatalf("%d records left, want 2", r)
	}
	if n, err := f.in.Purge(ctx, t0.Add(100*time.Hour), 0); err != nil || n != 2 {
		t.Fatalf("Purge with the default limit = %d, %v; want 2", n, err)
	}
}

// errRollback ends a transaction the suite only held.
var errRollback = errors.New("inboxtest: rollback")

// Purge skips a record another transaction holds (a duplicate delivery
// checking it, a concurrent purge) instead of waiting for it, and deletes
// the others.
func testPurgeSkipsLocked[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	if f.LockRecord == nil {
		t.Skip("Env.LockRecord is nil")
	}
	ctx := ctxT(t)
	ms := f.receive(t, 3, time.Second)
	held, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	go func() {
		done <- f.Driver.RunTx(ctx, func(tx TTx) error {
			if inserted, err := f.in.RecordTx(ctx, tx, ms[0]); err != nil || inserted {
				return errors.Join(err, errors.New("RecordTx of the oldest: want a duplicate"))
			}
			if err := f.LockRecord(ctx, tx, ms[0].ID); err != nil {
				return err
			}
			close(held)
			<-hold
			return errRollback
		})
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := f.in.Purge(pctx, f.clock.Now(), 10); err != nil || n != 2 {
		t.Fatalf("Purge beside a held record = %d, %v; want 2 (the others)", n, err)
	}
	release()
	if err := <-done; !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if n, err := f.in.Purge(ctx, f.clock.Now(), 10); err != nil || n != 1 {
		t.Fatalf("Purge once released = %d, %v; want 1", n, err)
	}
}

// Purges running at once delete every record once between them.
func testConcurrentPurges[TTx any](t *testing.T, h Harness[TTx]) {
	f := setup(t, h, inbox.Config{})
	ctx := ctxT(t)
	const records = 40
	f.receive(t, records, time.Second)
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				n, err := f.in.Purge(ctx, f.clock.Now(), 3)
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
				total.Add(n)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := total.Load(); n != records {
		t.Fatalf("purges deleted %d records between them, want %d", n, records)
	}
	if r := len(f.Records(t)); r != 0 {
		t.Fatalf("%d records left, want none", r)
	}
}
