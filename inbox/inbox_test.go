package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/internal/logtest"
)

// memTx is a fake transaction: records staged until commit.
type memTx struct{ staged []inbox.Record }

// memDriver is an in-memory Driver, enough to test the core's logic; the
// real concurrency behaviour is tested against each driver's database by
// the conformance suite, inbox/inboxtest.
type memDriver struct {
	mu      sync.Mutex
	records map[uuid.UUID]inbox.Record
	purges  []int
}

func (d *memDriver) RunTx(ctx context.Context, fn func(*memTx) error) error {
	tx := &memTx{}
	if err := fn(tx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range tx.staged {
		d.records[r.ID] = r
	}
	return nil
}

func (d *memDriver) RecordTx(ctx context.Context, tx *memTx, r inbox.Record) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.records[r.ID]; ok {
		return false, nil
	}
	tx.staged = append(tx.staged, r)
	return true, nil
}

func (d *memDriver) Purge(ctx context.Context, before time.Time, limit int) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for id, r := range d.records {
		if n < limit && r.ReceivedAt.Before(before) {
			delete(d.records, id)
			n++
		}
	}
	d.purges = append(d.purges, n)
	return int64(n), nil
}

func TestHandle(t *testing.T) {
	d := &memDriver{records: map[uuid.UUID]inbox.Record{}}
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)))
	in, err := inbox.New[*memTx](d, &inbox.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := inbox.Message{ID: outbox.NewID(), Topic: "orders"}
	runs := 0
	h := func(ctx context.Context, tx *memTx, got inbox.Message) error {
		runs++
		if got.ID != m.ID {
			t.Fatalf("handler got %v", got.ID)
		}
		return nil
	}
	boom := errors.New("boom")
	if _, err := in.Handle(ctx, m, func(context.Context, *memTx, inbox.Message) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Handle = %v, want the handler's error", err)
	}
	if len(d.records) != 0 {
		t.Fatal("a failed handler left a record")
	}
	var outcomes []inbox.Outcome
	for range 3 {
		o, err := in.Handle(ctx, m, h)
		if err != nil {
			t.Fatal(err)
		}
		outcomes = append(outcomes, o)
	}
	if fmt.Sprint(outcomes) != "[handled duplicate duplicate]" || runs != 1 {
		t.Fatalf("outcomes %v, %d runs", outcomes, runs)
	}
	r := d.records[m.ID]
	if r.Topic != "orders" || !r.ReceivedAt.Equal(clock.Now()) || r.ReceivedAt.Location() != time.UTC {
		t.Fatalf("record %+v, want topic orders received at the clock's now in UTC", r)
	}
	_, err = in.Handle(ctx, inbox.Message{Topic: "orders"}, h)
	if !errors.Is(err, inbox.ErrInvalidMessage) || !inbox.IsPermanent(err) {
		t.Fatalf("Handle without an ID = %v", err)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad payload")
	err := fmt.Errorf("handler: %w", inbox.Permanent(base))
	if !inbox.IsPermanent(err) || !errors.Is(err, base) {
		t.Fatalf("%v: IsPermanent %v, Is(base) %v", err, inbox.IsPermanent(err), errors.Is(err, base))
	}
	if inbox.IsPermanent(base) || inbox.Permanent(nil) != nil {
		t.Fatal("plain errors are not permanent; Permanent(nil) is nil")
	}
}

func TestPurgeExpiredBatches(t *testing.T) {
	d := &memDriver{records: map[uuid.UUID]inbox.Record{}}
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, err := inbox.New[*memTx](d, &inbox.Config{Clock: clock, Retention: time.Hour, PurgeBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, *memTx, inbox.Message) error { return nil }
	for range 5 {
		if _, err := in.Handle(context.Background(), inbox.Message{ID: outbox.NewID()}, nop); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(30 * time.Minute)
	if n, err := in.PurgeExpired(context.Background()); err != nil || n != 0 {
		t.Fatalf("PurgeExpired within the window = %d, %v", n, err)
	}
	clock.Advance(time.Hour)
	n, err := in.PurgeExpired(context.Background())
	if err != nil || n != 5 || len(d.records) != 0 {
		t.Fatalf("PurgeExpired = %d, %v; %d left", n, err, len(d.records))
	}
	if fmt.Sprint(d.purges) != "[0 2 2 1]" {
		t.Fatalf("purge batches %v, want [0 2 2 1]", d.purges)
	}
}

// A negative Config field is refused, not replaced; a nil driver too.
func TestNewRefusesBadConfig(t *testing.T) {
	d := &memDriver{records: map[uuid.UUID]inbox.Record{}}
	for _, c := range []struct {
		cfg  *inbox.Config
		want string
	}{
		{&inbox.Config{Retention: -time.Hour}, "Retention -1h0m0s: must not be negative"},
		{&inbox.Config{PurgeBatch: -1}, "PurgeBatch -1: must not be negative"},
	} {
		if _, err := inbox.New[*memTx](d, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
	if _, err := inbox.New[*memTx](nil, nil); err == nil {
		t.Error("New(nil driver) succeeded")
	}
}

// The Logger hears of each duplicate dropped (Debug) and of a purge that
// deleted records (Info).
func TestLogsDuplicatesAndPurges(t *testing.T) {
	var buf logtest.Buffer
	d := &memDriver{records: map[uuid.UUID]inbox.Record{}}
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	in, err := inbox.New[*memTx](d, &inbox.Config{Clock: clock, Retention: time.Hour, Logger: buf.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(context.Context, *memTx, inbox.Message) error { return nil }
	m := inbox.Message{ID: outbox.NewID(), Topic: "orders"}
	for range 2 {
		if _, err := in.Handle(context.Background(), m, nop); err != nil {
			t.Fatal(err)
		}
	}
	if got := buf.Lines("inbox: duplicate dropped"); len(got) != 1 || !strings.Contains(got[0], m.ID.String()) {
		t.Fatalf("duplicate log lines %q, want one naming %s", got, m.ID)
	}
	clock.Advance(2 * time.Hour)
	if n, err := in.PurgeExpired(context.Background()); err != nil || n != 1 {
		t.Fatalf("PurgeExpired = %d, %v", n, err)
	}
	if got := buf.Lines("inbox: purged expired records"); len(got) != 1 || !strings.Contains(got[0], "deleted=1") {
		t.Fatalf("purge log lines %q, want one with deleted=1", got)
	}
}
