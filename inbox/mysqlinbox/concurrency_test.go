package mysqlinbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxgo/outbox/inbox"
)

type result struct {
	o   inbox.Outcome
	err error
}

// holdFirst starts a delivery of m that applies its effect, then waits in
// its transaction until release is called (at the latest at cleanup), and
// fails if fails. It returns once the delivery holds its record.
func holdFirst(t *testing.T, in *inbox.Inbox[*sql.Tx], m inbox.Message, fails bool) (release func(), done <-chan result) {
	t.Helper()
	inside, hold, res := make(chan struct{}), make(chan struct{}), make(chan result, 1)
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the database is dropped: cleanups run last first
	go func() {
		o, err := in.Handle(context.Background(), m, func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
			if err := effect(ctx, tx, m); err != nil {
				return err
			}
			close(inside)
			<-hold
			if fails {
				return errors.New("first fails")
			}
			return nil
		})
		res <- result{o, err}
	}()
	select {
	case <-inside:
	case r := <-res:
		t.Fatalf("the first delivery ended early: %v, %v", r.o, r.err)
	}
	return release, res
}

// waitForInserts waits until n sessions of the test's database are in
// the middle of an inbox INSERT. While the first delivery holds its record,
// an insert of the same id in flight is one waiting on it. (MariaDB lists
// such waits neither in INNODB_TRX nor in INNODB_LOCK_WAITS.)
func waitForInserts(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d deliveries to wait on the first's record", n), 10*time.Second, func() bool {
		var k int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND COMMAND <> 'Sleep' AND INFO LIKE 'INSERT INTO ` + "`outbox_inbox`" + `%'`).Scan(&k)
		if err != nil {
			t.Fatal(err)
		}
		return k == n
	})
}

// A second delivery while the first is still in its transaction waits on
// the first's uncommitted record: it is a duplicate when the first commits,
// and runs the handler when the first rolls back.
func TestConcurrentDuplicateWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	for _, firstFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("first fails %v", firstFails), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			in := inbox.New(b.drv, nil)
			m := msg()
			release, first := holdFirst(t, in, m, firstFails)
			second := make(chan result, 1)
			go func() {
				o, err := in.Handle(context.Background(), m, effect)
				second <- result{o, err}
			}()
			waitForInserts(t, b.db, 1)
			select {
			case r := <-second:
				t.Fatalf("the second delivery returned %v, %v before the first ended", r.o, r.err)
			default:
			}
			release()
			r1, r2 := <-first, <-second
			if firstFails {
				if r1.err == nil || r2.err != nil || r2.o != inbox.Handled {
					t.Fatalf("first %v, %v; second %v, %v; want failure, then handled", r1.o, r1.err, r2.o, r2.err)
				}
			} else if r1.err != nil || r1.o != inbox.Handled || r2.err != nil || r2.o != inbox.Duplicate {
				t.Fatalf("first %v, %v; second %v, %v; want handled, then duplicate", r1.o, r1.err, r2.o, r2.err)
			}
			if n := b.effects(t, m.ID); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// Two deliveries wait on a first that rolls back. InnoDB may pick one of
// them as a deadlock victim (error 1213, the package documentation says
// why); either way one effect commits, and a redelivery of the victim is a
// duplicate.
func TestWaitersOnARolledBackFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, nil)
	m := msg()
	release, first := holdFirst(t, in, m, true)
	waiters := make(chan result, 2)
	for range 2 {
		go func() {
			o, err := in.Handle(context.Background(), m, effect)
			waiters <- result{o, err}
		}()
	}
	waitForInserts(t, b.db, 2)
	release()
	if r := <-first; r.err == nil {
		t.Fatalf("the first delivery succeeded: %v", r.o)
	}
	var got []string
	for range 2 {
		r := <-waiters
		switch {
		case r.err == nil:
			got = append(got, r.o.String())
		case isDeadlock(r.err):
			got = append(got, "deadlock")
			if o, err := in.Handle(context.Background(), m, effect); err != nil || o != inbox.Duplicate {
				t.Fatalf("redelivery of the deadlock victim = %v, %v; want duplicate", o, err)
			}
		default:
			t.Fatalf("a waiter failed: %v", r.err)
		}
	}
	if s := strings.Join(got, " "); s != "handled duplicate" && s != "duplicate handled" &&
		s != "handled deadlock" && s != "deadlock handled" {
		t.Fatalf("waiters: %s; want one handled, the other a duplicate or a deadlock victim", s)
	}
	t.Logf("waiters: %v", got)
	if n := b.effects(t, m.ID); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

func isDeadlock(err error) bool {
	var myErr *mysqldrv.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1213
}

// Many deliveries of the same messages at once: each message's effect once.
func TestConcurrentDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inbox.New(b.drv, nil)
	msgs := make([]inbox.Message, 20)
	for i := range msgs {
		msgs[i] = msg()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(msgs))
	for range 8 {
		wg.Go(func() {
			for _, m := range msgs {
				if _, err := in.Handle(context.Background(), m, effect); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if n := b.effects(t, m.ID); n != 1 {
			t.Fatalf("message %s: %d effects, want 1", m.ID, n)
		}
	}
}
