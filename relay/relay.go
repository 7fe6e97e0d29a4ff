package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxgo/outbox/internal/orderkeep"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/stores"
)

// Relay drains an outbox table to a broker: claim a batch, publish it
// pipelined, then mark (or delete) it in one statement. Publish first, mark
// after: a crash in between publishes the batch again (same IDs, which the
// broker's dedup window and the consumer's inbox drop); it never loses one.
type Relay struct {
	store stores.Store
	pub   publishers.Publisher
	cfg   Config
	log   *slog.Logger
	brk   *breaker
	// order tells whether pub keeps key order.
	order *orderkeep.Keeping
	// failures logs per-event failures, rate-limited.
	failures *failureLog
	// wakes hands wake-ups to the workers; made by New and never written
	// after: Wake may run at any time, concurrently with Start.
	wakes *waker
	// linger is lingerInterval, and now time.Now, for the workers'
	// pacing, which runs on timers, not on Config.Clock; a test may
	// replace them before Start.
	linger time.Duration
	now    func() time.Time
	// quiet is what the store's announcements said of unannounced
	// commits (stores.QuietListener).
	quiet quietSpells

	mu      sync.Mutex
	started bool
	stop    chan struct{}      // closed by Stop: claim nothing new
	hard    context.CancelFunc // cancels in-flight work
	done    chan struct{}      // closed when every goroutine has returned

	stats counters
}

// New returns a relay that drains store to pub. cfg may be nil.
func New(store stores.Store, pub publishers.Publisher, cfg *Config) (*Relay, error) {
	if store == nil {
		return nil, errors.New("relay: nil store")
	}
	if pub == nil && (cfg == nil || cfg.InProcess == nil) {
		return nil, errors.New("relay: nil publisher and no in-process handlers")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if ct := store.ClaimTimeout(); ct > 0 && c.PublishTimeout >= ct {
		return nil, fmt.Errorf("relay: config: PublishTimeout %v must be shorter than the store's claim timeout %v: "+
			"a publish that outlives its claim lets another relay publish the same events", c.PublishTimeout, ct)
	}
	if c.InProcess != nil {
		if err := c.InProcess.accepts(store); err != nil {
			return nil, fmt.Errorf("relay: config: InProcess: %w", err)
		}
	}
	r := &Relay{store: store, pub: pub, cfg: c, log: c.Logger, brk: newBreaker(c.OutageBackoff),
		failures: newFailureLog(c.Logger, c.Clock), wakes: newWaker(c.Workers),
		linger: lingerInterval, now: time.Now}
	r.order = orderkeep.New(pub, c.Clock.Now())
	return r, nil
}

// Start starts the relay's goroutines and returns. Cancelling ctx stops the
// relay at once, abandoning in-flight batches (their events stay pending);
// Stop is the graceful way.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("relay: already started")
	}
	r.started = true
	ctx, r.hard = context.WithCancel(ctx)
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range r.wakes.workers {
		wg.Go(func() { r.work(ctx, w) })
	}
	l, listen := r.store.(stores.Listener)
	listen = listen && !r.cfg.DisableListen
	if listen {
		wg.Go(func() {
			lctx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() {
				select {
				case <-r.stop:
				case <-lctx.Done():
				}
				cancel()
			}()
			if ql, ok := l.(stores.QuietListener); ok {
				_ = ql.ListenQuiet(lctx, r.wakeQuiet)
				return
			}
			_ = l.Listen(lctx, r.Wake)
		})
	}
	if r.cfg.Retention > 0 {
		wg.Go(func() { r.purge(ctx) })
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	wakeUps := "none: polling every " + r.cfg.PollInterval.String()
	if listen {
		wakeUps = l.WakeUps() + ", and polling every " + r.cfg.PollInterval.String()
	}
	r.log.Info("relay started", "workers", r.cfg.Workers, "batch_size", r.cfg.BatchSize, "ordered", !r.cfg.Unordered,
		"per_key", r.perKeyLog(), "wake_ups", wakeUps)
	return nil
}

// perKeyLog says how the relay sends a key's events, for its start line.
func (r *Relay) perKeyLog() string {
	switch {
	case r.cfg.Unordered:
		return "unordered"
	case r.order.Keeps(r.cfg.Clock.Now()):
		return fmt.Sprintf("up to %d per batch, pipelined (the publisher keeps key order)", r.cfg.PerKey)
	}
	return fmt.Sprintf("up to %d per batch, one in flight", r.cfg.PerKey)
}

// Stop stops claiming, lets in-flight batches finish publishing and be
// marked, and returns when every goroutine has returned. If ctx ends first,
// in-flight work is abandoned (its events stay pending, none is lost) and
// Stop returns ctx's error after the goroutines are gone.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started {
		r.mu.Unlock()
		return errors.New("relay: not started")
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	r.mu.Unlock()
	select {
	case <-r.done:
		r.hard()
		r.log.Info("relay stopped")
		return nil
	case <-ctx.Done():
		r.hard()
		<-r.done
		r.log.Warn("relay stopped before in-flight batches finished; their events stay pending")
		return fmt.Errorf("relay: stop: %w", ctx.Err())
	}
}

// Run starts the relay and blocks until ctx is done, then stops it
// gracefully within Config.ShutdownTimeout.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout)
	defer cancel()
	return r.Stop(sctx)
}

// Wake makes the relay look for events now: an idle worker claims at once
// (and hands on to the others if it finds a backlog). Programs that enqueue
// in the same process call it after commit when their store has no
// LISTEN/NOTIFY. It is safe to call at any time, from any goroutine, before
// Start too.
func (r *Relay) Wake() { r.wakes.wake() }

// wakeQuiet is Wake for an announcement that says how long its writer
// may now commit unannounced (stores.QuietListener).
func (r *Relay) wakeQuiet(quiet time.Duration) {
	r.quiet.hear(r.now(), quiet)
	r.wakes.wake()
}

// Stats returns the relay's counters since it was created, and whether it
// is paused now.
func (r *Relay) Stats() Stats {
	s := r.stats.snapshot()
	s.Paused, s.Refused, s.PausedSince = r.brk.state()
	return s
}

// Stats are a relay's counters.
type Stats struct {
	Claims      int64 // claims made, empty ones included
	Batches     int64 // non-empty batches completed
	Published   int64 // events acknowledged by the broker and marked
	Retried     int64 // failed attempts scheduled for retry
	Dead        int64 // events made dead
	Outages     int64 // batches that found the broker unavailable
	Refusals    int64 // batches the broker refused for the relay's configuration
	StoreErrors int64 // claims or completions that failed
	// Paused is true while the relay is paused as a whole (its circuit
	// breaker is open): its last batch found the broker unavailable, or,
	// with Refused, refusing the relay's configuration, and no batch has
	// succeeded since. PausedSince is when the pause began (wall clock);
	// zero when not paused.
	Paused, Refused bool
	PausedSince     time.Time
}

type counters struct {
	claims, batches, published, retried, dead, outages, refusals, storeErrors atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Claims: c.claims.Load(), Batches: c.batches.Load(), Published: c.published.Load(), Retried: c.retried.Load(),
		Dead: c.dead.Load(), Outages: c.outages.Load(), Refusals: c.refusals.Load(), StoreErrors: c.storeErrors.Load(),
	}
}
