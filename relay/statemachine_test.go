package relay

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/outboxgo/outbox/internal/logtest"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/clocktest"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// TestCancelWhileBreakerOpen: cancelling Start's context ends every
// goroutine at once, though the breaker is open for an hour.
func TestCancelWhileBreakerOpen(t *testing.T) {
	r, s, p := newMem(t, Config{OutageBackoff: outbox.Backoff{Min: time.Hour, Max: time.Hour}})
	p.set(every(publishers.Unavailable(errors.New("down"))))
	s.add(msgs(3, "")...)
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "an outage", func() bool { return r.Stats().Outages >= 1 })
	cancel()
	waitDone(t, r, "context cancelled with the breaker open")
	if n := chargedAttempts(s); n != 0 {
		t.Fatalf("the outage charged %d attempts", n)
	}
}

// TestProbeLeftByContextHandsOn: a worker whose probe ends with its context
// hands the probe on; the breaker does not wait for a result that never
// comes.
func TestProbeLeftByContextHandsOn(t *testing.T) {
	b := newBreaker(outbox.Backoff{Min: time.Millisecond, Max: time.Millisecond})
	b.failure(false)
	stopCh := make(chan struct{})
	eventually(t, "the first probe", func() bool {
		probe, ok := b.wait(context.Background(), stopCh)
		return probe && ok
	})
	second := make(chan bool, 1)
	go func() {
		probe, ok := b.wait(context.Background(), stopCh)
		second <- probe && ok
	}()
	b.abandon()
	select {
	case got := <-second:
		if !got {
			t.Fatal("the second waiter did not get the probe")
		}
	case <-time.After(bound):
		t.Fatal("the second waiter still waits after the first probe was abandoned")
	}
	// And a waiter leaves when its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := make(chan bool, 1)
	go func() {
		_, ok := b.wait(ctx, stopCh)
		left <- ok
	}()
	select {
	case ok := <-left:
		if ok {
			t.Fatal("wait returned ok with a cancelled context and a probe running")
		}
	case <-time.After(bound):
		t.Fatal("wait ignores its cancelled context while a probe runs")
	}
}

// TestWakeConcurrentWithStart: Wake may run while Start does (the race
// detector watches), and before it.
func TestWakeConcurrentWithStart(t *testing.T) {
	r, _, _ := newMem(t, Config{})
	r.Wake()
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 1000 {
			r.Wake()
		}
	})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	stop(t, r)
}

// TestWakeClaimsNow: with an hour's poll interval, Wake alone makes an idle
// relay claim.
func TestWakeClaimsNow(t *testing.T) {
	r, s, _ := newMem(t, Config{PollInterval: time.Hour})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "the first (empty) claims", func() bool { return r.Stats().Claims >= 2 })
	s.add(msgs(5, "")...)
	r.Wake()
	eventually(t, "the events published after Wake", func() bool { return len(published(s)) == 5 })
}

// claimsAfterWake waits for r's workers to settle (see settled) after
// their first claims, adds events to s and wakes r, waits for the events
// to be published, at least atLeast more claims and the workers settled
// again, and returns how many claims the events took.
func claimsAfterWake(t *testing.T, r *Relay, s *memStore, events []outbox.Message, atLeast int64) int64 {
	t.Helper()
	eventually(t, "the workers' first claims", func() bool { return r.Stats().Claims >= int64(len(r.wakes.workers)) && settled(r) })
	before := r.Stats().Claims
	s.add(events...)
	r.Wake()
	eventually(t, "the events published and the workers waiting out the hour", func() bool {
		return len(published(s)) == len(events) && r.Stats().Claims >= before+atLeast && settled(r)
	})
	return r.Stats().Claims - before
}

// settled reports whether every worker of r waits out an hour's poll
// interval with no wake-up left for it.
func settled(r *Relay) bool {
	for _, w := range r.wakes.workers {
		if time.Duration(w.idle.Load()) != time.Hour || len(w.ch) > 0 {
			return false
		}
	}
	return true
}

// TestTrickleWakesOneWorker: an event at a time wakes one worker, not all
// of them: it claims the event and, a trickle, claims once more only after
// the linger (nothing): two claims, none by its idle peer. Settled is both workers
// waiting out the hour's poll interval, no wake-up left for them.
func TestTrickleWakesOneWorker(t *testing.T) {
	r, s, _ := newMem(t, Config{PollInterval: time.Hour, Workers: 2})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	if got := claimsAfterWake(t, r, s, msgs(1, ""), 2); got != 2 {
		t.Errorf("%d claims for one event, want 2 (claim, linger)", got)
	}
}

// TestOnlyABacklogWakesAPeer: in ordered mode a worker whose claim took a
// quarter of the batch size or more hands a wake-up to its idle peer (the
// claim may have stopped at the batch size, or at a store's cap on its
// keys, with events left behind); one whose claim took less took all
// there was, and claims again itself without waking the peer. The writers
// announce every commit here, so no claim follows from streaming: the
// woken worker claims the three events, claims again at once (a batch of
// more than one), finds none and waits out the hour; its peer claims once
// more only after a backlog's batch.
func TestOnlyABacklogWakesAPeer(t *testing.T) {
	for _, c := range []struct {
		name   string
		batch  int
		claims int64
	}{
		{"under a quarter of the batch size", 16, 2},
		{"a quarter of the batch size", 12, 3},
		{"a full batch", 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, s, _ := newMem(t, Config{PollInterval: time.Hour, Workers: 2, BatchSize: c.batch})
			r.linger = time.Hour
			r.quiet.hear(time.Now(), 0)
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stop(t, r)
			var events []outbox.Message
			for _, k := range []string{"k1", "k2", "k3"} {
				events = append(events, msgs(1, k)...)
			}
			if got := claimsAfterWake(t, r, s, events, c.claims); got != c.claims {
				t.Errorf("%d claims, want %d", got, c.claims)
			}
		})
	}
}

// TestOneEventAmongManyClaimsAgainSoon: a claim that finds one event just
// after one that found more (events a few milliseconds apart, whose
// NOTIFYs the writers pace away) is followed by another claim soon, with no
// wake-up, and so is one that finds none, until streamGap has passed since
// the last find; a claim that finds one event streamGap or more after the
// last find waits for a wake-up, as at a trickle (here for ever: the poll
// interval and the linger are an hour). Each claim takes the test's clock
// on by streamLinger.
//
// Once the writers' announcements say when commits go unannounced
// (stores.QuietListener), a claim that finds one event or none is followed
// by another soon only during a quiet spell too.
func TestOneEventAmongManyClaimsAgainSoon(t *testing.T) {
	for _, c := range []struct {
		name   string
		gap    time.Duration // added between the two claims that find events
		quiet  time.Duration // heard before the first claim; negative: nothing heard
		claims int64
	}{
		// Claims at 0 (2 events) and 1 × streamLinger (1 event), then
		// empty ones at 2, 3, … × streamLinger, the last the first that
		// begins streamGap or more after the find.
		{"events streaming", 0, -1, 2 + int64((streamGap+streamLinger-1)/streamLinger)},
		// Claims at 0 (2 events) and streamLinger + streamGap (1 event).
		{"a trickle", streamGap, -1, 2},
		// The writers announce every commit: no look after either claim.
		{"events streaming, every commit announced", 0, 0, 2},
		// A spell until 2 × streamLinger: the claim at streamLinger (1
		// event) is in it, the empty one at 2 × streamLinger is not.
		{"events streaming in a short quiet spell", 0, streamLinger, 3},
		// A trickle in a spell: no look, as without the signal.
		{"a trickle in a quiet spell", streamGap, time.Hour, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
			r, s, p := newMem(t, Config{PollInterval: time.Hour, Workers: 1, Unordered: true})
			r.linger, r.now = time.Hour, clock.Now
			r.quiet.hear(clock.Now(), c.quiet)
			s.beforeClaim = func(context.Context) error {
				clock.Advance(streamLinger)
				return nil
			}
			var once sync.Once
			p.set(func(_ context.Context, m []outbox.Message) []error {
				once.Do(func() {
					// The next event commits while the first batch is out.
					s.add(msgs(1, "")...)
					clock.Advance(c.gap)
				})
				return make([]error, len(m))
			})
			s.add(msgs(2, "")...)
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stop(t, r)
			w := r.wakes.workers[0]
			eventually(t, "the events published and the worker waiting out the hour", func() bool {
				return len(published(s)) == 3 && time.Duration(w.idle.Load()) == time.Hour && len(w.ch) == 0
			})
			if got := r.Stats().Claims; got != c.claims {
				t.Errorf("%d claims, want %d", got, c.claims)
			}
		})
	}
}

// TestStopWaitsForInFlightBatch: Stop returns only after the batch being
// published is acknowledged and marked.
func TestStopWaitsForInFlightBatch(t *testing.T) {
	r, s, p := newMem(t, Config{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.set(func(_ context.Context, m []outbox.Message) []error {
		once.Do(func() { close(entered) })
		<-release
		return make([]error, len(m))
	})
	s.add(msgs(4, "")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		stopped <- r.Stop(ctx)
	}()
	eventually(t, "Stop to begin", func() bool {
		select {
		case <-r.stop:
			return true
		default:
			return false
		}
	})
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a batch was being published", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if n := len(published(s)); n != 4 {
		t.Fatalf("%d of 4 events marked published when Stop returned", n)
	}
}

// TestStopDeadlineLeavesEventsPending: a Stop whose context ends abandons
// the in-flight batch: its events stay pending, uncharged.
func TestStopDeadlineLeavesEventsPending(t *testing.T) {
	r, s, p := newMem(t, Config{})
	entered := make(chan struct{})
	var once sync.Once
	p.set(func(ctx context.Context, m []outbox.Message) []error {
		once.Do(func() { close(entered) })
		<-ctx.Done()
		return every(publishers.Unavailable(ctx.Err()))(ctx, m)
	})
	s.add(msgs(4, "")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want context.Canceled", err)
	}
	waitDone(t, r, "after Stop")
	if n := s.count(0); n != 4 {
		t.Fatalf("%d of 4 events pending after the abandoned Stop", n)
	}
	if n := chargedAttempts(s); n != 0 {
		t.Fatalf("the abandoned batch charged %d attempts", n)
	}
}

// TestPublishTimeoutIsAnOutage: a broker that never acknowledges within
// PublishTimeout opens the breaker; nothing is charged; once it answers,
// everything is published.
func TestPublishTimeoutIsAnOutage(t *testing.T) {
	r, s, p := newMem(t, Config{PublishTimeout: 20 * time.Millisecond})
	p.set(func(ctx context.Context, m []outbox.Message) []error {
		<-ctx.Done() // never acknowledges
		return every(publishers.Unavailable(ctx.Err()))(ctx, m)
	})
	s.add(msgs(10, "k")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "two outages", func() bool { return r.Stats().Outages >= 2 })
	if n := chargedAttempts(s); n != 0 {
		t.Fatalf("timeouts charged %d attempts", n)
	}
	p.set(nil)
	eventually(t, "every event published", func() bool { return len(published(s)) == 10 })
}

// TestStoreTimeoutIsAStoreError: a claim that hangs becomes a store error
// after StoreTimeout, and the relay goes on once the store answers.
func TestStoreTimeoutIsAStoreError(t *testing.T) {
	r, s, _ := newMem(t, Config{StoreTimeout: 20 * time.Millisecond})
	var hang sync.Mutex
	hanging := true
	s.beforeClaim = func(ctx context.Context) error {
		hang.Lock()
		h := hanging
		hang.Unlock()
		if h {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	s.add(msgs(3, "")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "a store error", func() bool { return r.Stats().StoreErrors >= 1 })
	hang.Lock()
	hanging = false
	hang.Unlock()
	eventually(t, "every event published", func() bool { return len(published(s)) == 3 })
}

// TestRefusedConfigurationPausesAndChargesNothing: a broker that refuses
// the relay's configuration pauses it like an outage, charges no event,
// and says so in an error line each time; fixed, the relay goes on.
func TestRefusedConfigurationPausesAndChargesNothing(t *testing.T) {
	var logs logtest.Buffer
	r, s, p := newMem(t, Config{Logger: logs.Logger()})
	p.set(every(publishers.Misconfigured(errors.New("ACCESS_REFUSED - Login was refused"))))
	s.add(msgs(5, "k")...)
	s.add(msgs(5, "")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "two refusals", func() bool { return r.Stats().Refusals >= 2 })
	// A refusal is counted when its batch ends and logged after, by the
	// worker that met it: wait for both lines.
	eventually(t, "two refusals logged", func() bool { return len(logs.Lines("refused the relay's configuration")) >= 2 })
	if n := chargedAttempts(s); n != 0 {
		t.Fatalf("refusals charged %d attempts", n)
	}
	if n := s.count(2); n != 0 {
		t.Fatalf("%d events dead because the broker refused the configuration", n)
	}
	lines := logs.Lines("refused the relay's configuration")
	if len(lines) < 2 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "ACCESS_REFUSED") {
		t.Fatalf("want an ERROR line per refusal naming the broker's error; got %q", lines)
	}
	if st := r.Stats(); st.Outages != 0 {
		t.Fatalf("refusals counted as %d outages", st.Outages)
	}
	p.set(nil)
	eventually(t, "every event published", func() bool { return len(published(s)) == 10 })
}

// TestFailuresAreLoggedRateLimited: a broker that fails every event shows
// in the log at once — one line for the topic, then one per interval that
// counts the failures it left out — not one line per event, nor none.
func TestFailuresAreLoggedRateLimited(t *testing.T) {
	var logs logtest.Buffer
	clock := clocktest.New(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	r, s, p := newMem(t, Config{Logger: logs.Logger(), Clock: clock, MaxAttempts: 100, Unordered: true,
		RetryBackoff: outbox.Backoff{Min: time.Second, Max: time.Second}})
	p.set(every(errors.New("nats: no response from stream")))
	s.add(msgs(50, "")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "every event to fail once", func() bool { return chargedAttempts(s) == 50 })
	if lines := logs.Lines("publish failed; retrying"); len(lines) != 1 || !strings.Contains(lines[0], "no response from stream") ||
		!strings.Contains(lines[0], "level=WARN") {
		t.Fatalf("after 50 failures in one interval want one WARN line naming the error; got %q", lines)
	}
	clock.Advance(failureLogEvery + time.Second) // the retries are due, the interval over
	r.Wake()
	eventually(t, "every event to fail twice", func() bool { return chargedAttempts(s) == 100 })
	lines := logs.Lines("publish failed; retrying")
	if len(lines) != 2 || !strings.Contains(lines[1], "more_since_last_line=49") {
		t.Fatalf("want a second line counting the 49 left out; got %q", lines)
	}
}

// TestKeyedFailureSaysItHoldsTheKey: in ordered mode a failing keyed head
// logs an error that says it holds its key back and how to go on.
func TestKeyedFailureSaysItHoldsTheKey(t *testing.T) {
	var logs logtest.Buffer
	r, s, p := newMem(t, Config{Logger: logs.Logger()})
	p.set(every(errors.New("rejected")))
	s.add(msgs(3, "acct-1")...)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stop(t, r)
	eventually(t, "the head to fail", func() bool { return chargedAttempts(s) >= 1 })
	lines := logs.Lines("holds its key back")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") || !strings.Contains(lines[0], "key=acct-1") ||
		!strings.Contains(lines[0], "outbox dead-letter") {
		t.Fatalf("want one ERROR line naming the key and the way out; got %q", lines)
	}
	if n := chargedAttempts(s); n != 1 {
		t.Fatalf("%d attempts charged: the key's later events must wait behind its head", n)
	}
}

// txStore is a memStore whose claims are "transactions" of type int.
type txStore struct{ memStore }

func (*txStore) ClaimsInTx(int) {}

// TestNewRefusesWhatWouldFailLater: relay.New refuses a publish timeout
// that outlives the store's claims, and in-process handlers of another
// transaction type than the store's claims (or a store without any).
func TestNewRefusesWhatWouldFailLater(t *testing.T) {
	h := func(context.Context, string, outbox.Message) error { return nil }
	for _, c := range []struct {
		name  string
		store stores.Store
		cfg   Config
		want  string
	}{
		{"publish timeout = claim timeout", &memStore{}, Config{PublishTimeout: 30 * time.Second}, "must be shorter than the store's claim timeout 30s"},
		{"publish timeout > claim timeout", &memStore{}, Config{PublishTimeout: time.Minute}, "must be shorter"},
		{"handlers without transactions", &memStore{}, Config{InProcess: Handlers(map[string]Handler[string]{"t": h})}, "the handlers take a string"},
		{"handlers of another type", &txStore{}, Config{InProcess: Handlers(map[string]Handler[string]{"t": h})}, "TxClaimer[string]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.store, &memPub{}, &c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New = %v, want an error containing %q", err, c.want)
			}
		})
	}
	ok := func(context.Context, int, outbox.Message) error { return nil }
	if _, err := New(&txStore{}, &memPub{}, &Config{InProcess: Handlers(map[string]Handler[int]{"t": ok})}); err != nil {
		t.Fatalf("New with handlers of the store's own type: %v", err)
	}
}

// TestStartLogsWhetherItListens: a store without LISTEN is not said to
// listen.
func TestStartLogsWhetherItListens(t *testing.T) {
	var logs logtest.Buffer
	r, _, _ := newMem(t, Config{Logger: logs.Logger()})
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop(t, r)
	if l := logs.Lines("relay started"); len(l) != 1 || !strings.Contains(l[0], `wake_ups="none: polling every 20ms"`) {
		t.Fatalf("start line %q, want it to say the relay only polls, for a store without Listen", l)
	}
}

// TestErrorTextIsStorable: a broker error quoting NUL bytes or invalid
// UTF-8, or a very long one, is stored as text every store holds.
func TestErrorTextIsStorable(t *testing.T) {
	long := strings.Repeat("é", 5000)
	for _, c := range []struct{ in, want string }{
		{"bad \x00 byte", "bad \uFFFD byte"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
	} {
		if got := errText(errors.New(c.in)); got != c.want {
			t.Errorf("errText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	got := errText(errors.New(long))
	if len(got) > maxErrorText+len("…") || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("errText of %d bytes = %d bytes, valid UTF-8 %v", len(long), len(got), utf8.ValidString(got))
	}
}

// TestBreakerState: the breaker says whether it is open, for a refusal or
// an outage, and since when; a success closes it.
func TestBreakerState(t *testing.T) {
	b := newBreaker(outbox.Backoff{Min: time.Millisecond, Max: time.Millisecond})
	if open, _, since := b.state(); open || !since.IsZero() {
		t.Fatalf("new breaker: open %v since %v", open, since)
	}
	before := time.Now()
	b.failure(false)
	open, refused, since := b.state()
	if !open || refused || since.Before(before) {
		t.Errorf("after an outage: open %v refused %v since %v", open, refused, since)
	}
	b.failure(true)
	if open, refused, again := b.state(); !open || !refused || !again.Equal(since) {
		t.Errorf("after a refusal: open %v refused %v since %v (was %v)", open, refused, again, since)
	}
	b.success()
	if open, refused, since := b.state(); open || refused || !since.IsZero() {
		t.Errorf("after a success: open %v refused %v since %v", open, refused, since)
	}
}

// TestRetryAfterIsHonoured: a failure that says when to try again
// (publishers.RetryAfter) waits that long, not the shorter backoff; one
// that asks for less than the backoff waits the backoff.
func TestRetryAfterIsHonoured(t *testing.T) {
	for _, c := range []struct {
		name        string
		after       time.Duration
		wantAtLeast time.Duration
	}{
		{"longer than the backoff", 10 * time.Minute, 10 * time.Minute},
		{"shorter than the backoff", time.Millisecond, time.Second},
		{"past the bound", 48 * time.Hour, publishers.MaxRetryAfter},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, s, p := newMem(t, Config{RetryBackoff: outbox.Backoff{Min: time.Second, Max: time.Second}})
			p.set(func(_ context.Context, msgs []outbox.Message) []error {
				errs := make([]error, len(msgs))
				for i := range errs {
					errs[i] = publishers.RetryAfter(errors.New("429 Too Many Requests"), c.after)
				}
				return errs
			})
			s.add(msgs(1, "")...)
			before := time.Now()
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stop(t, r)
			eventually(t, "the failed attempt stored", func() bool { return s.snapshot()[0].Attempts == 1 })
			rec := s.snapshot()[0]
			if wait := rec.available.Sub(before); wait < c.wantAtLeast || wait > c.wantAtLeast+time.Minute {
				t.Errorf("next attempt in %v, want about %v", wait, c.wantAtLeast)
			}
		})
	}
}
