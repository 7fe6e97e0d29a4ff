package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxgo/outbox/internal/orderkeep"
	"github.com/outboxgo/outbox/publishers"
)

// Relay streams the outbox table's inserts from PostgreSQL's write-ahead
// log to a broker (see the package doc).
type Relay struct {
	cfg    Config
	pub    publishers.Publisher
	log    *slog.Logger
	repl   *pgconn.Config // the streaming session's
	table  string         // quoted schema.table of this project's outbox table
	source string         // quoted schema.table the stream reads: table, or the Debezium table
	// indexChecked: setup has looked for the table's delayed index (it
	// runs on the stream's goroutine only).
	indexChecked bool
	// order tells whether pub keeps key order.
	order    *orderkeep.Keeping
	failures *failureLog
	eng      *engine
	markWake chan struct{}

	mu      sync.Mutex
	started bool
	pool    *pgxpool.Pool
	stop    chan struct{}
	hard    context.CancelFunc
	done    chan struct{}
	active  atomic.Bool // the relay holds the slot and streams
	// shutdownSeen: the server is shutting down while the stream cannot
	// confirm what it was sent; the session lets go (see shutdownWatch).
	shutdownSeen atomic.Bool

	stats counters
}

// New returns a relay that streams cfg's outbox table to pub. It checks
// the configuration; it connects only at Start.
func New(cfg *Config, pub publishers.Publisher) (*Relay, error) {
	if pub == nil {
		return nil, errors.New("pgcdc: nil publisher")
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pc, err := pgconn.ParseConfig(c.ConnString)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: ConnString: %w", redactErr(err))
	}
	pc.RuntimeParams["replication"] = "database"
	if pc.RuntimeParams["application_name"] == "" {
		pc.RuntimeParams["application_name"] = "outbox-cdc"
	}
	r := &Relay{cfg: c, pub: pub, log: c.Logger, repl: pc,
		table:    pgx.Identifier{c.Schema, c.Table}.Sanitize(),
		failures: newFailureLog(c.Logger), markWake: make(chan struct{}, 1)}
	r.source = r.table
	if d := c.Debezium; d != nil {
		r.source = pgx.Identifier{d.Schema, d.Table}.Sanitize()
	}
	r.eng = newEngine(r)
	r.order = orderkeep.New(pub, c.Clock.Now())
	return r, nil
}

// redactErr drops what a connection-string error may quote.
func redactErr(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("cannot parse the connection string (its text is not shown: it may hold a password)")
	}
	return err
}

// Start connects and starts the relay's goroutines, and returns. The
// stream itself (re)connects in the background: a slot another relay
// holds makes this one a hot standby that takes over when the slot is
// free. Cancelling ctx stops the relay at once, confirming nothing more;
// Stop is the graceful way.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("pgcdc: already started")
	}
	pcfg, err := pgxpool.ParseConfig(r.cfg.ConnString)
	if err != nil {
		return fmt.Errorf("pgcdc: ConnString: %w", redactErr(err))
	}
	pcfg.MaxConns = 4
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "outbox-cdc"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("pgcdc: %w", err)
	}
	r.pool = pool
	r.started = true
	ctx, r.hard = context.WithCancel(ctx)
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	// The stream ends the others: it returns once stopped and drained.
	inner, cancelInner := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.eng.dispatch(inner) })
	wg.Go(func() { r.marker(inner) })
	wg.Go(func() { r.sweeper(inner) })
	wg.Go(func() { r.shutdownWatch(inner) })
	if r.cfg.HeartbeatInterval > 0 {
		wg.Go(func() { r.heartbeat(inner) })
	}
	if r.cfg.Mode == MarkRows && r.cfg.Retention > 0 {
		wg.Go(func() { r.purge(inner) })
	}
	go func() {
		r.run(ctx)
		cancelInner()
		wg.Wait()
		r.eng.wg.Wait()
		r.mu.Lock()
		r.pool = nil // Status connects on its own from now on
		r.mu.Unlock()
		pool.Close()
		close(r.done)
	}()
	r.log.Info("cdc relay started", "slot", r.cfg.Slot, "publication", r.cfg.Publication, "table", r.source,
		"mode", r.cfg.Mode.String(), "ordered", map[bool]string{true: "pipelined (the publisher keeps key order)", false: "one event of a key in flight"}[r.order.Keeps(r.cfg.Clock.Now())])
	return nil
}

// Stop stops reading the stream, lets the events read so far be published,
// marked and confirmed, and returns when every goroutine has returned. If
// ctx ends first, in-flight work is abandoned (nothing more is confirmed:
// a restart sends it again) and Stop returns ctx's error.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	if !r.started {
		r.mu.Unlock()
		return errors.New("pgcdc: not started")
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
		r.log.Info("cdc relay stopped")
		return nil
	case <-ctx.Done():
		r.hard()
		<-r.done
		r.log.Warn("cdc relay stopped before in-flight events finished; a restart sends them again")
		return fmt.Errorf("pgcdc: stop: %w", ctx.Err())
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

// Active reports whether the relay holds the slot and streams (false while
// it waits as a hot standby, or reconnects).
func (r *Relay) Active() bool { return r.active.Load() }

// Stats returns the relay's counters since it was created.
func (r *Relay) Stats() Stats { return r.stats.snapshot() }

// Stats are a relay's counters.
type Stats struct {
	Decoded   int64 // outbox inserts decoded from the stream
	Delayed   int64 // of them, delayed events left to the due sweep
	Swept     int64 // delayed (or replayed) events the due sweep took
	Published int64 // events the broker acknowledged
	Retried   int64 // failed attempts scheduled for retry
	Dead      int64 // events made dead
	Outages   int64 // calls that found the broker unavailable or refusing
	Confirms  int64 // standby status updates that advanced the slot
	Restarts  int64 // stream sessions that ended in an error
	// Unseen counts the marks that found rows whose transaction the log
	// had delivered before it was visible (a synchronous standby's ack
	// pending, say): they are marked again once it is.
	Unseen int64
}

type counters struct {
	decoded, delayed, swept, published, retried, dead, outages, confirms, restarts, unseen atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{Decoded: c.decoded.Load(), Delayed: c.delayed.Load(), Swept: c.swept.Load(), Published: c.published.Load(),
		Retried: c.retried.Load(), Dead: c.dead.Load(), Outages: c.outages.Load(), Confirms: c.confirms.Load(), Restarts: c.restarts.Load(), Unseen: c.unseen.Load()}
}

// stopping reports whether Stop was called.
func (r *Relay) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// sleep waits d, or less when ctx ends or the relay stops; it reports
// whether it waited the whole d.
func (r *Relay) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-r.stop:
	}
	return false
}
