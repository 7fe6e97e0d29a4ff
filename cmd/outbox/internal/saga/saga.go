package saga

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/sqltx"
	"github.com/outboxgo/outbox/nats/natsembed"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/stores"
)

// Options configure a run. The zero value is the default demo.
type Options struct {
	// Orders is how many orders the orders service confirms. Default 500.
	Orders int
	// Outage is how long the broker is down, starting once a third of the
	// orders are confirmed. Default 3s; negative: no outage.
	Outage time.Duration
	// Relays is how many relays drain each service's outbox. Default 2.
	Relays int
	// Crash makes the first orders relay die between publish and mark,
	// once: a fresh relay takes over and publishes that batch again, and
	// the stock service's inbox drops the redelivery.
	Crash bool
	// DataDir holds the databases and the broker's store. Default: a
	// temporary directory, removed at the end. A directory given here is
	// kept; it must not hold a previous run.
	DataDir string
	// Clock stamps every time the outbox, the inbox, the relays and the
	// services write. Default outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives the library's logs (relays, subscribers, broker).
	// Default: none, the progress lines say what happens.
	Logger *slog.Logger
	// ProgressEvery is the interval of the progress lines. Default 500ms.
	ProgressEvery time.Duration
	// Timeout bounds the whole run once the broker and the services are
	// up: the confirmations (over three times the outage, at least 1.5s),
	// the outage and the wait for the saga to complete. It must exceed the
	// confirmations' span. Default 60s.
	Timeout time.Duration
	// Watch, when set, watches the run: the demo's --ui serves a
	// dashboard of the orders service's outbox. Default none.
	Watch Watcher
}

// Watcher watches a run through the orders service's outbox.
type Watcher interface {
	// Start is called with the orders service's outbox store before any
	// order is confirmed; an error ends the run.
	Start(orders stores.Store) error
	// Relay is called for each relay that drains that outbox, as it
	// starts.
	Relay(name string, r *relay.Relay)
	// Done is called once the run is verified (or failed), before anything
	// is closed: the run ends when it returns.
	Done(ctx context.Context)
}

// Defaults for Options.
const (
	DefaultOrders        = 500
	DefaultOutage        = 3 * time.Second
	DefaultRelays        = 2
	DefaultProgressEvery = 500 * time.Millisecond
	DefaultTimeout       = time.Minute
)

// ErrOptions is returned (wrapped) by Validate and Run for Options that
// cannot make a run.
var ErrOptions = errors.New("invalid demo options")

// Validate returns an error wrapping ErrOptions when o cannot make a run:
// a negative Orders, Relays, ProgressEvery or Timeout, or a Timeout that
// does not outlast the confirmations (three times the outage, at least
// 1.5s). Zero fields mean their defaults.
func (o Options) Validate() error {
	var errs []error
	if o.Orders < 0 {
		errs = append(errs, fmt.Errorf("Orders %d is negative", o.Orders))
	}
	if o.Relays < 0 {
		errs = append(errs, fmt.Errorf("Relays %d is negative", o.Relays))
	}
	if o.ProgressEvery < 0 {
		errs = append(errs, fmt.Errorf("ProgressEvery %v is negative", o.ProgressEvery))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Timeout %v is negative", o.Timeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrOptions, err)
	}
	d := o.withDefaults()
	if span := d.confirmSpan(); d.Timeout <= span {
		return fmt.Errorf("%w: a timeout of %v leaves no time: the orders are confirmed over %v (three times the outage, at least 1.5s)",
			ErrOptions, d.Timeout, span)
	}
	return nil
}

// confirmSpan is how long the orders service takes to confirm every order:
// three times the outage, at least 1.5s.
func (o Options) confirmSpan() time.Duration {
	return max(3*max(o.Outage, 0), 1500*time.Millisecond)
}

func (o Options) withDefaults() Options {
	if o.Orders <= 0 {
		o.Orders = DefaultOrders
	}
	if o.Outage == 0 {
		o.Outage = DefaultOutage
	}
	if o.Relays <= 0 {
		o.Relays = DefaultRelays
	}
	if o.Clock == nil {
		o.Clock = outbox.SystemClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultProgressEvery
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// ErrVerification is returned (wrapped) when the verification fails.
var ErrVerification = errors.New("verification failed")

// Run plays the saga and writes its progress and verification to w. It
// returns the Report, and an error wrapping ErrVerification when an order
// was lost or applied twice (or any other error that stopped the run).
func Run(ctx context.Context, opts Options, w io.Writer) (rep Report, err error) {
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	opts = opts.withDefaults()
	out := &printer{w: w, clock: opts.Clock, start: opts.Clock.Now()}
	rep = Report{Orders: opts.Orders, Relays: opts.Relays, Crash: opts.Crash}
	if opts.Outage > 0 {
		rep.Outage = opts.Outage
	}

	// Where everything lives: two SQLite files and the broker's store.
	dir := opts.DataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "outbox-demo-"); err != nil {
			return rep, err
		}
		defer func() {
			if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
				err = rerr
			}
		}()
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return rep, err
		}
		if _, err := os.Stat(filepath.Join(dir, "orders.db")); err == nil {
			return rep, fmt.Errorf("%s holds a previous run: remove it or choose another --data-dir", dir)
		}
		rep.Kept = true
	}
	rep.DataDir = dir

	// The broker: NATS with JetStream, in this process.
	srv, err := natsembed.Start(ctx, natsembed.Config{DataDir: filepath.Join(dir, "nats"), Logger: opts.Logger.With("component", "nats-server")})
	if err != nil {
		return rep, err
	}
	defer srv.Shutdown()
	nc, err := connect(srv.URL(), "saga-services")
	if err != nil {
		return rep, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return rep, err
	}
	if err := createStreams(ctx, js); err != nil {
		return rep, err
	}

	// The two services, each with its own database.
	ordersSvc, err := openService(ctx, dir, "orders", ordersSchema, opts.Clock)
	if err != nil {
		return rep, err
	}
	defer ordersSvc.db.Close()
	stockSvc, err := openService(ctx, dir, "stock", stockSchema, opts.Clock)
	if err != nil {
		return rep, err
	}
	defer stockSvc.db.Close()
	if err := seed(ctx, ordersSvc.db, stockSvc.db, opts.Orders); err != nil {
		return rep, err
	}
	orders := &Orders{db: ordersSvc.db, ob: ordersSvc.ob, clock: opts.Clock}
	if opts.Watch != nil {
		if err := opts.Watch.Start(ordersSvc.store); err != nil {
			return rep, err
		}
		defer opts.Watch.Done(ctx)
	}
	stock := &Stock{ob: stockSvc.ob, clock: opts.Clock}

	out.printf("outbox demo: %d orders, %d relays per outbox, broker outage %v%s; data in %s",
		opts.Orders, opts.Relays, rep.Outage, map[bool]string{true: ", a relay crash", false: ""}[opts.Crash], dir)

	// Consumers: the stock service reads OrderConfirmed, the orders service
	// reads StockReserved, each through its own inbox.
	var stockCounts, ordersCounts counts
	stockSub, err := subscribe(ctx, js, stockSvc, topicOrders, stock.OnOrderConfirmed, &stockCounts, opts.Logger)
	if err != nil {
		return rep, err
	}
	defer stockSub.Stop(context.Background()) //nolint:errcheck // stopped below; a no-op then
	ordersSub, err := subscribe(ctx, js, ordersSvc, topicStock, orders.OnStockReserved, &ordersCounts, opts.Logger)
	if err != nil {
		return rep, err
	}
	defer ordersSub.Stop(context.Background()) //nolint:errcheck // idem

	// Relays: opts.Relays per outbox. With --crash, the first orders relay
	// dies between publish and mark on its first batch once the broker is
	// back from the outage (a batch of the backlog), or, without an outage,
	// once a sixth of the orders are confirmed.
	var confirmed atomic.Int64
	mon := &monitor{orders: ordersSvc, stock: stockSvc, confirmed: &confirmed,
		stockCounts: &stockCounts, ordersCounts: &ordersCounts, srv: srv, js: js, total: opts.Orders}
	rs := &relays{url: srv.URL(), clock: opts.Clock, logger: opts.Logger}
	if opts.Watch != nil {
		rs.watched, rs.watch = ordersSvc, opts.Watch
	}
	release := make(chan struct{}) // lets the crashed relay's hook return, at the end
	var releaseOnce sync.Once
	releaseCrashed := func() { releaseOnce.Do(func() { close(release) }) }
	defer rs.stop()
	defer releaseCrashed()
	var crashed atomic.Bool
	crashHook := func(p *relayProc, msgs []outbox.Message, errs []error) {
		if len(msgs) == 0 || crashed.Load() {
			return
		}
		n := confirmed.Load()
		switch {
		case rep.Outage <= 0 && n < int64(opts.Orders/6):
			return
		case rep.Outage > 0 && !mon.isUp():
			return // wait for the broker to return, and a batch of the backlog
		case rep.Outage > 0 && len(msgs) < 10 && n < int64(opts.Orders*5/6):
			return // a small batch: another relay took the backlog; wait a while for a big one
		}
		for _, e := range errs {
			if e != nil {
				return // not a clean publish: let it be
			}
		}
		crashed.Store(true)
		rep.Crashed = len(msgs)
		rs.kill(p)
		next, err := rs.start(ctx, ordersSvc, nil)
		name := "no relay"
		if err == nil {
			name = next.name
		}
		out.printf("** %s CRASHED: the broker acked a batch of %s, the relay died before marking it; %s takes over. When the lease (%v) runs out, the batch is published again",
			p.name, plural(len(msgs), "event"), name, claimTimeout)
		<-release
	}
	for i := range opts.Relays {
		var hook func(*relayProc, []outbox.Message, []error)
		if i == 0 && opts.Crash {
			hook = crashHook
		}
		if _, err := rs.start(ctx, ordersSvc, hook); err != nil {
			return rep, err
		}
		if _, err := rs.start(ctx, stockSvc, nil); err != nil {
			return rep, err
		}
	}

	// Progress lines, until the end.
	mon.rs = rs
	progressCtx, stopProgress := context.WithCancel(ctx)
	var progressDone sync.WaitGroup
	progressDone.Go(func() { mon.run(progressCtx, out, opts.ProgressEvery, 50*time.Millisecond) })
	defer func() { stopProgress(); progressDone.Wait() }()

	// Timeout bounds the rest of the run, outage included.
	deadline := time.Now().Add(opts.Timeout)
	runCtx, cancelRun := context.WithDeadline(ctx, deadline)
	defer cancelRun()
	var sayStopping sync.Once
	timedOut := func() error {
		if ctx.Err() != nil {
			sayStopping.Do(func() { out.printf("** interrupted: stopping the relays and the consumers") })
			return ctx.Err()
		}
		return fmt.Errorf("the demo did not finish within its timeout of %v", opts.Timeout)
	}

	// The orders service confirms orders at a steady pace over three times
	// the outage; the broker goes down after a third of them.
	period := opts.confirmSpan()
	ticker := time.NewTicker(max(period/time.Duration(opts.Orders), time.Millisecond))
	defer ticker.Stop()
	var outage sync.WaitGroup
	var outageErr error
	confirmStart := opts.Clock.Now()
	for id := int64(1); id <= int64(opts.Orders); id++ {
		select {
		case <-runCtx.Done():
			outage.Wait()
			return rep, timedOut()
		case <-ticker.C:
		}
		if err := orders.Confirm(ctx, id); err != nil {
			outage.Wait()
			return rep, err
		}
		confirmed.Add(1)
		if id == int64(opts.Orders/3) && rep.Outage > 0 {
			outage.Go(func() {
				srv.Shutdown()
				down := opts.Clock.Now()
				mon.setDown(down)
				out.printf("** broker DOWN for %v: orders keep being confirmed (they need only the database); the outbox holds their events", rep.Outage)
				t := time.NewTimer(rep.Outage)
				defer t.Stop()
				select {
				case <-runCtx.Done():
					outageErr = timedOut()
					return
				case <-t.C:
				}
				if outageErr = srv.Restart(runCtx); outageErr != nil {
					if runCtx.Err() != nil {
						outageErr = timedOut()
					}
					return
				}
				up := opts.Clock.Now()
				rep.BrokerDown = up.Sub(down)
				mon.setUp(up)
				out.printf("** broker UP after %v: the relays drain the backlog", rep.BrokerDown.Round(10*time.Millisecond))
			})
		}
	}
	rep.ConfirmTime = opts.Clock.Now().Sub(confirmStart)
	outage.Wait()
	if outageErr != nil {
		return rep, outageErr
	}

	// Wait for the saga to complete: every confirmed order reserved and
	// back, both outboxes empty, both consumers caught up.
	lastConfirm := opts.Clock.Now()
	done, err := mon.waitComplete(ctx, time.Until(deadline))
	if err != nil {
		return rep, err
	}
	rep.Settle = opts.Clock.Now().Sub(lastConfirm)
	mon.line(out)

	// Stop everything before counting: nothing moves any more.
	releaseCrashed()
	rs.stop()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = stockSub.Stop(stopCtx)
	_ = ordersSub.Stop(stopCtx)
	stopProgress()
	progressDone.Wait()

	rep.Published = rs.published()
	rep.BrokerDuplicates = rs.brokerDuplicates()
	rep.DuplicatesDropped = stockCounts.duplicates.Load() + ordersCounts.duplicates.Load()
	rep.PeakBacklog = mon.peak()
	rep.Drain = mon.drainTime()
	if err := verify(ctx, ordersSvc.db, stockSvc.db, &rep); err != nil {
		return rep, err
	}
	rep.Total = opts.Clock.Now().Sub(out.start)
	rep.print(out)
	if !done {
		out.printf("the saga did not complete within %v", opts.Timeout)
	}
	if !rep.OK() {
		return rep, fmt.Errorf("%w: %s", ErrVerification, rep.summary())
	}
	return rep, nil
}

// skus are what the demo sells; order i buys 1 to 3 of skus[i%len(skus)].
var skus = []string{"apple", "banana", "cherry", "damson", "elder"}

// initialStock is every SKU's stock at the start: enough for every order.
const initialStock = 1_000_000

// seed creates the orders, all pending, and stocks every SKU.
func seed(ctx context.Context, ordersDB, stockDB *sql.DB, n int) error {
	tx, err := ordersDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	for id := 1; id <= n; id++ {
		if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, sku, qty) VALUES (?, ?, ?)`,
			id, skus[id%len(skus)], 1+id%3); err != nil {
			return err
		}
	}
	if err := sqltx.Commit(ctx, tx); err != nil {
		return err
	}
	for _, sku := range skus {
		if _, err := stockDB.ExecContext(ctx, `INSERT INTO stock (sku, on_hand) VALUES (?, ?)`, sku, initialStock); err != nil {
			return err
		}
	}
	return nil
}

// plural is "1 event", "2 events".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
