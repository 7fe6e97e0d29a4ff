package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/stores"
)

// The multi-process tests re-execute the test binary as a relay process:
// TestMain runs child instead of the tests when envChild is set.
const (
	envChild = "OUTBOX_SQLITE_TEST_CHILD" // "relay", "hold" or "soak"
	envDB    = "OUTBOX_SQLITE_TEST_DB"
	envNow   = "OUTBOX_SQLITE_TEST_NOW" // claim clock, unix µs; empty: the wall clock
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// child is a relay process. It prints "ready", waits for a line on stdin,
// then:
//   - relay: claims 10 at a time and completes, printing "claim <id>" for
//     each record, until a claim made after a second line on stdin ("last")
//     comes back empty; then prints "done".
//   - hold: claims once, prints the ids and "held", and waits to be killed.
func child(mode string) error {
	db, err := sqlite.Open(os.Getenv(envDB))
	if err != nil {
		return err
	}
	defer db.Close()
	d, err := sqlite.New(db, nil)
	if err != nil {
		return err
	}
	s := d.Store()
	clock := time.Now
	if v := os.Getenv(envNow); v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		clock = func() time.Time { return time.UnixMicro(us) }
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	if mode == "soak" {
		return soakChild(s, in, &lockedWriter{w: os.Stdout})
	}
	var last atomic.Bool
	if mode == "relay" {
		go func() {
			_, _ = in.ReadString('\n')
			last.Store(true)
		}()
	}
	ctx := context.Background()
	for {
		final := last.Load() // before the claim: an empty claim after it means drained
		b, err := s.Claim(ctx, stores.ClaimParams{Limit: 10, Now: clock()})
		if err != nil {
			// A store error is retryable, as the relay treats it: a
			// busy database must not end a relay.
			fmt.Fprintln(os.Stderr, "child: claim (retrying):", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		recs := b.Records()
		for _, r := range recs {
			fmt.Fprintln(out, "claim", r.ID)
		}
		if mode == "hold" {
			fmt.Fprintln(out, "held")
			if err := out.Flush(); err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, in) // until killed
			return nil
		}
		if len(recs) == 0 {
			if !final {
				time.Sleep(time.Millisecond) // poll, as a relay does
				continue
			}
			fmt.Fprintln(out, "done")
			return out.Flush()
		}
		pub := make([]uuid.UUID, len(recs))
		for i, r := range recs {
			pub[i] = r.ID
		}
		if err := b.Complete(ctx, stores.Outcome{Now: clock(), Published: pub}); err != nil {
			// As the relay does: give the batch back, go on. Its records
			// are claimed again, which the parent reports.
			fmt.Fprintln(os.Stderr, "child: complete:", err)
			_ = b.Abort(ctx)
		}
	}
}

type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines <-chan string // closed at EOF
}

// spawn starts a relay process on the database at path, and waits until it
// is ready.
func spawn(t *testing.T, mode, path, now string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+mode, envDB+"="+path, envNow+"="+now)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	p := &proc{cmd: cmd, stdin: stdin, lines: lines}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.wait()
	})
	if l := p.next(t); l != "ready" {
		t.Fatalf("child said %q, want ready", l)
	}
	return p
}

func (p *proc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatalf("child exited early")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("child silent for 30s")
	}
	return ""
}

// wait reads the child's output to its end, then waits for it to exit.
func (p *proc) wait() error {
	for range p.lines {
	}
	return p.cmd.Wait()
}

// say writes a line to the child's stdin.
func (p *proc) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// Relays in separate processes drain one database file together, while a
// writer keeps enqueueing from this one: every record is claimed exactly
// once.
func TestMultiProcessRelays(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const procs, n = 4, 2000
	b := setup(t)
	ctx := context.Background()
	want := map[uuid.UUID]bool{}
	all := make([]outbox.Message, 0, n)
	for range n {
		m := outbox.Message{ID: outbox.NewID(), Topic: "orders"}
		want[m.ID] = true
		all = append(all, m)
	}
	// Half before the relays start, half while they run.
	if err := b.enqueue(ctx, all[:n/2], true); err != nil {
		t.Fatal(err)
	}
	ps := make([]*proc, procs)
	for i := range ps {
		ps[i] = spawn(t, "relay", b.path, "")
	}
	for _, p := range ps {
		p.say(t, "go")
	}
	for i := n / 2; i < n; i += 50 {
		if err := b.enqueue(ctx, all[i:i+50], true); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ps {
		p.say(t, "last")
	}
	seen := map[uuid.UUID]int{}
	active := 0
	for i, p := range ps {
		got := 0
		for l := p.next(t); l != "done"; l = p.next(t) {
			id, err := uuid.Parse(strings.TrimPrefix(l, "claim "))
			if err != nil {
				t.Fatalf("child %d: %q", i, l)
			}
			seen[id]++
			got++
		}
		if err := p.wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if got > 0 {
			active++
		}
		t.Logf("process %d claimed %d", i, got)
	}
	checkOnce(t, seen, want)
	if active < 2 {
		t.Errorf("only %d of %d processes claimed anything: the test did not exercise concurrency", active, procs)
	}
}

// A relay process killed while it holds a claim leaves nothing locked:
// writers go on, and its records are claimable once the lease lapses.
func TestKilledRelayLeaseLapses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	b := setup(t)
	ctx := context.Background()
	msgs := testMsgs(5)
	if err := b.enqueue(ctx, msgs, true); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour)
	p := spawn(t, "hold", b.path, strconv.FormatInt(now.UnixMicro(), 10))
	p.say(t, "go")
	held := map[uuid.UUID]int{}
	for l := p.next(t); l != "held"; l = p.next(t) {
		held[uuid.MustParse(strings.TrimPrefix(l, "claim "))]++
	}
	if len(held) != 5 {
		t.Fatalf("child held %d records, want 5", len(held))
	}
	if err := b.enqueue(ctx, testMsgs(1), true); err != nil {
		t.Fatalf("enqueue while another process holds a claim: %v", err)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.wait() // killed: an error

	lease := b.store.Config().ClaimTimeout
	if got := mustClaim(t, b.store, 10, now.Add(lease-time.Microsecond)); len(got.Records()) != 1 {
		t.Fatalf("before the lease lapsed, claimed %d, want only the new record", len(got.Records()))
	}
	got := mustClaim(t, b.store, 10, now.Add(lease))
	for _, r := range got.Records() {
		held[r.ID]++
	}
	if len(got.Records()) != 5 {
		t.Fatalf("after the lease lapsed, claimed %d, want the dead relay's 5", len(got.Records()))
	}
	for id, c := range held {
		if c != 2 {
			t.Fatalf("record %s: claimed %d times, want by the dead relay and then once", id, c)
		}
	}
}

// Relays on separate *sql.DB handles (as separate processes would have),
// with writers enqueueing on handles of their own at the same time: every
// record is claimed exactly once.
func TestConcurrentHandles(t *testing.T) {
	const relays, writers, perWriter, perTx = 4, 2, 40, 25
	b := setup(t)
	ctx := context.Background()

	var (
		mu       sync.Mutex
		want     = map[uuid.UUID]bool{}
		seen     = map[uuid.UUID]int{}
		written  atomic.Bool
		wg, wwg  sync.WaitGroup
		errs     = make(chan error, relays+writers)
		claimed  atomic.Int64
		expected = int64(writers * perWriter * perTx)
		progress atomic.Int64 // unix ns of the last commit or non-empty claim
	)
	progress.Store(time.Now().UnixNano())
	// stalled reports whether nothing moved for a long time: the test's
	// deadline is on progress, not on how long the whole takes.
	stalled := func() bool { return time.Since(time.Unix(0, progress.Load())) > time.Minute }
	for range writers {
		db := open(t, b.path)
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			d, err := sqlite.New(db, nil)
			if err != nil {
				errs <- err
				return
			}
			ob := outbox.New(d, nil)
			for range perWriter {
				ms := make([]outbox.Message, perTx)
				for j := range ms {
					ms[j] = outbox.Message{ID: outbox.NewID(), Topic: "orders", Key: fmt.Sprint(j % 3)}
				}
				mu.Lock()
				for _, m := range ms {
					want[m.ID] = true
				}
				mu.Unlock()
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				if err := ob.Enqueue(ctx, tx, ms...); err != nil {
					_ = tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
				progress.Store(time.Now().UnixNano())
			}
		}()
	}
	go func() { wwg.Wait(); written.Store(true) }()
	for range relays {
		d, err := sqlite.New(open(t, b.path), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := d.Store()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				done := written.Load() // read before the claim: an empty claim after it means drained
				bt, err := s.Claim(ctx, stores.ClaimParams{Limit: 20, Now: time.Now()})
				if err != nil {
					// Retryable, as the relay treats a store error.
					if stalled() {
						errs <- fmt.Errorf("no progress for a minute; last claim error: %w", err)
						return
					}
					t.Logf("claim (retrying): %v", err)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				recs := bt.Records()
				if len(recs) == 0 {
					if done || claimed.Load() >= expected {
						return
					}
					if stalled() {
						errs <- fmt.Errorf("no progress for a minute: %d of %d claimed", claimed.Load(), expected)
						return
					}
					time.Sleep(time.Millisecond) // poll, as a relay does
					continue
				}
				progress.Store(time.Now().UnixNano())
				claimed.Add(int64(len(recs)))
				mu.Lock()
				pub := make([]uuid.UUID, len(recs))
				for i, r := range recs {
					seen[r.ID]++
					pub[i] = r.ID
				}
				mu.Unlock()
				if err := bt.Complete(ctx, stores.Outcome{Now: time.Now(), Published: pub, DeletePublished: len(pub)%2 == 0}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	wwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkOnce(t, seen, want)
}

func checkOnce(t *testing.T, seen map[uuid.UUID]int, want map[uuid.UUID]bool) {
	t.Helper()
	if len(seen) != len(want) {
		t.Fatalf("claimed %d distinct records, want %d", len(seen), len(want))
	}
	for id, c := range seen {
		if !want[id] {
			t.Fatalf("claimed %s, never enqueued", id)
		}
		if c != 1 {
			t.Fatalf("record %s claimed %d times", id, c)
		}
	}
}
