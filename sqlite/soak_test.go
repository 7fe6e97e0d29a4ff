package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/sqlite"
)

// envSoak sets how long TestSoak's writers write ("60s"); unset, 3s.
const envSoak = "OUTBOX_SQLITE_SOAK"

const (
	soakWriters = 8
	soakRelays  = 2
	// soakStall is how long the drain may go without one new event
	// published before the test gives up: a deadline on progress.
	soakStall = 60 * time.Second
)

// TestSoak runs 8 writers at full speed into one database file (each
// transaction a business row and one event, half of them keyed over 1,000
// keys) while 2 relay processes (relay.Relay with default settings, each
// publishing to a counting publisher that reports every publish to this
// process) drain it. It checks that no writer fails, that every committed
// event is published exactly once (no re-publish: no relay died), that the
// relays make progress while the writers write, and that the backlog
// drains afterwards. It logs the pending count sampled during the run, the
// commit → publish latency, and the relays' counters. OUTBOX_SQLITE_SOAK
// sets how long the writers write (default 3s).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dur := 3 * time.Second
	if v := os.Getenv(envSoak); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", envSoak, v)
		}
		dur = d
	}
	b := setup(t)
	ctx := context.Background()
	if _, err := b.db.ExecContext(ctx, `CREATE TABLE soak_orders (id INTEGER PRIMARY KEY, note TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	sink := newSoakSink()
	ps := make([]*proc, soakRelays)
	for i := range ps {
		ps[i] = spawn(t, "soak", b.path, "")
	}
	stats := make([]chan string, len(ps))
	var readers sync.WaitGroup
	for i, p := range ps {
		stats[i] = make(chan string, 1)
		readers.Go(func() { sink.read(p, stats[i]) })
	}
	for _, p := range ps {
		p.say(t, "go")
	}

	// The writers, on one handle from Open, as an application's would be.
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		commits  = make(map[uuid.UUID]int64, 1<<16) // id → commit time, unix ns
		failures = map[string]int{}
		failErr  = map[string]string{}
		seq      atomic.Int64
		slowest  time.Duration // the longest COMMIT (an fsync of the WAL, mostly)
	)
	fail := func(stage string, err error) {
		mu.Lock()
		failures[stage]++
		if _, ok := failErr[stage]; !ok {
			failErr[stage] = err.Error()
		}
		mu.Unlock()
	}
	start := time.Now()
	for range soakWriters {
		wg.Go(func() {
			for !stop.Load() {
				n := seq.Add(1)
				m := outbox.Message{ID: outbox.NewID(), Topic: "orders", Payload: []byte(`{"n":` + strconv.FormatInt(n, 10) + `}`)}
				if n%2 == 0 {
					m.Key = "order-" + strconv.FormatInt(n%1000, 10)
				}
				tx, err := b.db.BeginTx(ctx, nil)
				if err != nil {
					fail("begin", err)
					continue
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO soak_orders (note) VALUES (?)`, "order"); err != nil {
					_ = tx.Rollback()
					fail("business write", err)
					continue
				}
				if err := b.ob.Enqueue(ctx, tx, m); err != nil {
					_ = tx.Rollback()
					fail("enqueue", err)
					continue
				}
				c0 := time.Now()
				if err := tx.Commit(); err != nil {
					fail("commit", err)
					continue
				}
				at := time.Now()
				mu.Lock()
				commits[m.ID] = at.UnixNano()
				slowest = max(slowest, at.Sub(c0))
				mu.Unlock()
			}
		})
	}

	// Sample the backlog while the writers write, on a handle of its own.
	sampler := open(t, b.path)
	var samples []int64
	var maxWAL int64 // bytes
	publishedBefore := sink.published()
	progress := 0 // samples at which the relays had published more than at the previous one
	tick := time.NewTicker(250 * time.Millisecond)
	for time.Since(start) < dur {
		<-tick.C
		if n, err := pending(ctx, sampler); err == nil {
			samples = append(samples, n)
		}
		if fi, err := os.Stat(b.path + "-wal"); err == nil {
			maxWAL = max(maxWAL, fi.Size())
		}
		if p := sink.published(); p > publishedBefore {
			progress++
			publishedBefore = p
		}
	}
	tick.Stop()
	stop.Store(true)
	writeEnd := time.Now()
	pendingAtEnd, err := pending(ctx, sampler)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait() // each writer ends its transaction
	stopped := time.Since(writeEnd)
	mu.Lock()
	committed := len(commits)
	mu.Unlock()

	// Drain: every committed event published, with a deadline on progress.
	last, lastAt := sink.published(), time.Now()
	for {
		missing := sink.missing(commits)
		if missing == 0 {
			break
		}
		if p := sink.published(); p != last {
			last, lastAt = p, time.Now()
		} else if time.Since(lastAt) > soakStall {
			t.Fatalf("%d of %d committed events still unpublished, none published for %v", missing, committed, soakStall)
		}
		if sink.exited() {
			t.Fatalf("a relay process exited while %d events were unpublished", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	drained := time.Now()
	for _, p := range ps {
		p.say(t, "stop")
	}
	var relayStats []string
	for i, p := range ps {
		select {
		case s := <-stats[i]:
			relayStats = append(relayStats, s)
		case <-time.After(soakStall):
			t.Fatalf("relay process %d did not stop within %v", i, soakStall)
		}
		if err := p.wait(); err != nil {
			t.Fatalf("relay process %d: %v", i, err)
		}
	}
	readers.Wait()

	// The numbers.
	lat := sink.latencies(commits)
	slices.Sort(lat)
	maxPending := int64(0)
	for _, n := range samples {
		maxPending = max(maxPending, n)
	}
	nfail := 0
	for _, n := range failures {
		nfail += n
	}
	t.Logf("writers: %d for %v: %d transactions committed (%.0f/s), %d failed %v",
		soakWriters, writeEnd.Sub(start).Round(time.Millisecond), committed,
		float64(committed)/writeEnd.Sub(start).Seconds(), nfail, failures)
	for stage, e := range failErr {
		t.Logf("  first %s failure: %s", stage, e)
	}
	t.Logf("pending during the run: max %d, at the writers' stop %d (%.1f%% of committed); samples %v",
		maxPending, pendingAtEnd, 100*float64(pendingAtEnd)/float64(max(committed, 1)), compact(samples))
	t.Logf("the writers took %v to end their last transactions; the slowest COMMIT took %v; the WAL file grew to %.1f MB at most",
		stopped.Round(time.Millisecond), slowest.Round(time.Millisecond), float64(maxWAL)/1e6)
	t.Logf("commit → publish latency over %d events: p50 %v, p99 %v, max %v; drained %v after the writers stopped",
		len(lat), pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1), drained.Sub(writeEnd).Round(time.Millisecond))
	t.Logf("publishes %d, distinct %d, re-publishes %d; relays: %s",
		sink.total(), sink.distinct(), sink.total()-sink.distinct(), strings.Join(relayStats, "; "))

	if u := sink.unknown(commits); u != 0 {
		t.Errorf("%d published events were never committed", u)
	}
	if progress == 0 {
		t.Errorf("the relays published nothing while the writers wrote")
	}
	// A COMMIT holds the write lock through its fsync. When the disk
	// stalled one for longer than the busy timeout (a loaded machine's
	// disk can, for tens of seconds), writers waiting that long fail and
	// a relay may run out of lease: that is the disk, not the queueing
	// under test, and the counts below are reported, not asserted.
	if slowest >= 5*time.Second {
		t.Logf("the disk stalled a COMMIT for %v: writer failures (%d), re-publishes and relay store errors are not held against the store",
			slowest.Round(time.Millisecond), nfail)
		return
	}
	if nfail != 0 {
		t.Errorf("%d writer transactions failed: %v", nfail, failures)
	}
	if r := sink.total() - sink.distinct(); r != 0 {
		t.Errorf("%d re-publishes, though no relay died", r)
	}
	for i, s := range relayStats {
		if !strings.Contains(s, " store_errors=0 ") {
			t.Errorf("relay process %d had store errors: %s", i, s)
		}
	}
}

// pending counts the events not yet published.
func pending(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM outbox_messages WHERE status = 0`).Scan(&n)
	return n, err
}

// soakChild is a relay process for TestSoak: a relay.Relay with default
// settings over the database, publishing to a counting publisher that
// prints "p <id> <unix ns>" for each publish. On the next line of stdin it
// stops the relay, prints its counters as "stats …" and then "done".
func soakChild(s *sqlite.Store, in interface{ ReadString(byte) (string, error) }, out *lockedWriter) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := relay.New(s, countingPub{out: out}, &relay.Config{Logger: log})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		return err
	}
	_, _ = in.ReadString('\n')
	if err := r.Stop(ctx); err != nil {
		return err
	}
	st := r.Stats()
	out.printf("stats claims=%d batches=%d published=%d store_errors=%d outages=%d\n",
		st.Claims, st.Batches, st.Published, st.StoreErrors, st.Outages)
	out.printf("done\n")
	return out.flush()
}

// countingPub acknowledges every message and reports it on out.
type countingPub struct{ out *lockedWriter }

func (p countingPub) Publish(_ context.Context, msgs []outbox.Message) []error {
	now := time.Now().UnixNano()
	var sb strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&sb, "p %s %d\n", m.ID, now)
	}
	p.out.printf("%s", sb.String())
	if err := p.out.flush(); err != nil {
		errs := make([]error, len(msgs))
		for i := range errs {
			errs[i] = publishers.Unavailable(err)
		}
		return errs
	}
	return make([]error, len(msgs))
}
func (countingPub) Close() error { return nil }

// soakSink collects what the relay processes published.
type soakSink struct {
	mu    sync.Mutex
	count map[uuid.UUID]int
	first map[uuid.UUID]int64
	n     int
	gone  int
}

func newSoakSink() *soakSink {
	return &soakSink{count: make(map[uuid.UUID]int, 1<<16), first: make(map[uuid.UUID]int64, 1<<16)}
}

// read consumes a relay process's output until it ends, sending its
// "stats" line on stats.
func (s *soakSink) read(p *proc, stats chan<- string) {
	defer func() {
		s.mu.Lock()
		s.gone++
		s.mu.Unlock()
	}()
	for l := range p.lines {
		switch {
		case strings.HasPrefix(l, "p "):
			f := strings.Fields(l)
			id, err1 := uuid.Parse(f[1])
			at, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			s.mu.Lock()
			s.count[id]++
			if _, ok := s.first[id]; !ok {
				s.first[id] = at
			}
			s.n++
			s.mu.Unlock()
		case strings.HasPrefix(l, "stats "):
			stats <- strings.TrimPrefix(l, "stats ")
		}
	}
}

func (s *soakSink) published() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.count) }
func (s *soakSink) total() int     { s.mu.Lock(); defer s.mu.Unlock(); return s.n }
func (s *soakSink) distinct() int  { return s.published() }

// exited reports whether a relay process's output ended.
func (s *soakSink) exited() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.gone > 0 }

// missing counts the committed events not published yet.
func (s *soakSink) missing(commits map[uuid.UUID]int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range commits {
		if s.count[id] == 0 {
			n++
		}
	}
	return n
}

// unknown counts the published events never committed.
func (s *soakSink) unknown(commits map[uuid.UUID]int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id := range s.count {
		if _, ok := commits[id]; !ok {
			n++
		}
	}
	return n
}

// latencies are first publish minus commit, per committed event.
func (s *soakSink) latencies(commits map[uuid.UUID]int64) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(commits))
	for id, c := range commits {
		if p, ok := s.first[id]; ok {
			out = append(out, time.Duration(max(p-c, 0)))
		}
	}
	return out
}

// pct is the q-quantile of sorted d.
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := min(int(q*float64(len(d))), len(d)-1)
	return d[i].Round(time.Millisecond)
}

// compact shortens a long list of samples to about 20 of them.
func compact(s []int64) []int64 {
	if len(s) <= 20 {
		return s
	}
	out := make([]int64, 0, 21)
	for i := 0; i < len(s); i += len(s) / 20 {
		out = append(out, s[i])
	}
	return append(out, s[len(s)-1])
}

// lockedWriter is a child's stdout, shared by the relay's workers.
type lockedWriter struct {
	mu  sync.Mutex
	buf strings.Builder
	w   *os.File
}

func (w *lockedWriter) printf(format string, args ...any) {
	w.mu.Lock()
	fmt.Fprintf(&w.buf, format, args...)
	w.mu.Unlock()
}

func (w *lockedWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.WriteString(w.buf.String())
	w.buf.Reset()
	return err
}
