package saga

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
	"github.com/outboxgo/outbox/sqlite"
	"github.com/outboxgo/outbox/subscribers"
)

// The broker's names: one stream carries both services' events, another
// their dead letters.
const (
	streamName    = "SAGA"
	subjectPrefix = "saga" // topic "orders" → subject "saga.orders"
	deadStream    = "SAGA_DEAD"
	deadPrefix    = "saga-dead"
)

// Tuning for a demo that shows an outage and a crash in seconds rather than
// minutes; the comments say what production would use.
const (
	// claimTimeout is the SQLite store's lease: a relay that dies holding
	// a batch loses it to another relay after this long (default 30s).
	claimTimeout = 2 * time.Second
	// publishTimeout bounds one batch's publish; it must stay below
	// claimTimeout (default 10s).
	publishTimeout = time.Second
	// duplicateWindow is the stream's: JetStream drops a re-sent event
	// with an ID it stored this recently (nats.Publisher.EnsureStream
	// makes it 2m). The demo keeps it short so that the re-publish after
	// --crash, claimTimeout later, gets through and the inbox has to drop
	// it: the inbox is what guarantees one effect, whatever the window.
	duplicateWindow = 200 * time.Millisecond
	// ackWait is how long a delivery may go unacknowledged before
	// JetStream redelivers it (default 30s).
	ackWait = 2 * time.Second
)

// service is one service's database: its business tables, its outbox and
// its inbox, all in one SQLite file.
type service struct {
	name  string
	db    *sql.DB
	ob    *outbox.Outbox[*sql.Tx]
	store *sqlite.Store // for Stats: the pending backlog
	in    *inbox.Inbox[*sql.Tx]
}

// openService opens (creating) dir/name.db and migrates the business schema,
// the outbox table and the inbox table.
func openService(ctx context.Context, dir, name, schema string, clock outbox.Clock) (*service, error) {
	db, err := sqlite.Open(filepath.Join(dir, name+".db"))
	if err != nil {
		return nil, err
	}
	s := &service{name: name, db: db}
	err = func() error {
		if _, err := db.ExecContext(ctx, schema); err != nil {
			return fmt.Errorf("%s schema: %w", name, err)
		}
		// One object per database: enqueue, the relay's store, the inbox.
		d, err := sqlite.New(db, &sqlite.Config{ClaimTimeout: claimTimeout, Clock: clock})
		if err != nil {
			return err
		}
		if err := d.Migrate(ctx); err != nil { // the outbox and the inbox tables
			return err
		}
		s.store = d.Store()
		s.ob = outbox.New(d, &outbox.Config{Clock: clock})
		if s.in, err = inbox.New(d.Inbox(), &inbox.Config{Clock: clock}); err != nil {
			return err
		}
		return nil
	}()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// connect connects to the broker, reconnecting forever (the outage).
func connect(url, name string) (*nats.Conn, error) {
	return nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
}

// createStreams creates the events stream, with the short duplicate window
// and batch publish allowed (so that the relays' publishers pipeline each
// order's events, as they do by default on a stream SetupStream makes),
// and the dead-letter stream.
func createStreams(ctx context.Context, js jetstream.JetStream) error {
	for _, cfg := range []jetstream.StreamConfig{
		{Name: streamName, Subjects: []string{subjectPrefix + ".>"}, Duplicates: duplicateWindow, Storage: jetstream.FileStorage, AllowBatchPublish: true},
		{Name: deadStream, Subjects: []string{deadPrefix + ".>"}, Storage: jetstream.FileStorage},
	} {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("stream %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// relays runs the relays of both outboxes and keeps every one it started,
// so that their counters add up and Stop stops them all.
type relays struct {
	url    string
	clock  outbox.Clock
	logger *slog.Logger

	// watch, when set, is told of each relay of watched.
	watched *service
	watch   Watcher

	mu   sync.Mutex
	all  []*relayProc
	seq  map[string]int
	dead sync.WaitGroup // stops of crashed relays
}

type relayProc struct {
	name string
	r    *relay.Relay
	pub  *natspub.Publisher
}

// start starts one relay draining svc's outbox, with its own store handle
// and its own broker connection, as a separate relay process would have.
// hook, when set, is the relay's AfterPublish hook (the --crash).
func (rs *relays) start(ctx context.Context, svc *service, hook func(*relayProc, []outbox.Message, []error)) (*relayProc, error) {
	rs.mu.Lock()
	if rs.seq == nil {
		rs.seq = map[string]int{}
	}
	rs.seq[svc.name]++
	name := fmt.Sprintf("%s-relay-%d", svc.name, rs.seq[svc.name])
	rs.mu.Unlock()

	d, err := sqlite.New(svc.db, &sqlite.Config{ClaimTimeout: claimTimeout})
	if err != nil {
		return nil, err
	}
	store := d.Store()
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{
		URL: rs.url, Name: name, SubjectPrefix: subjectPrefix,
		ReconnectWait: 50 * time.Millisecond,
		// Start even while the broker is down (a relay replacing a
		// crashed one mid-outage); publishes fail as unavailable until
		// it is back.
		Options: []nats.Option{nats.RetryOnFailedConnect(true)},
	})
	if err != nil {
		return nil, err
	}
	p := &relayProc{name: name, pub: pub}
	cfg := &relay.Config{
		BatchSize:      100,
		Workers:        1,
		PollInterval:   200 * time.Millisecond,
		PublishTimeout: publishTimeout,
		// Probe a broker that is down every 100–500ms (default 250ms–30s)
		// so the backlog starts draining as soon as it is back.
		OutageBackoff: outbox.Backoff{Min: 100 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
		Clock:         rs.clock,
		Logger:        rs.logger.With("relay", name),
	}
	if hook != nil {
		cfg.Hooks.AfterPublish = func(msgs []outbox.Message, errs []error) { hook(p, msgs, errs) }
	}
	if p.r, err = relay.New(store, pub, cfg); err != nil {
		_ = pub.Close()
		return nil, err
	}
	if err := p.r.Start(ctx); err != nil {
		_ = pub.Close()
		return nil, err
	}
	rs.mu.Lock()
	rs.all = append(rs.all, p)
	rs.mu.Unlock()
	if rs.watch != nil && svc == rs.watched {
		rs.watch.Relay(name, p.r)
	}
	return p, nil
}

// kill stops p hard, from inside its own AfterPublish hook: it claims
// nothing more, and the batch it holds is never marked (the hook does not
// return until the demo ends). The batch's lease runs out after
// claimTimeout, and another relay publishes it again.
func (rs *relays) kill(p *relayProc) {
	rs.dead.Go(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.r.Stop(ctx) // returns once the hook returns (at the end)
	})
}

// published is how many events the broker acknowledged, over every relay.
func (rs *relays) published() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var n int64
	for _, p := range rs.all {
		n += p.r.Stats().Published
	}
	return n
}

// brokerDuplicates is how many publishes JetStream dropped as duplicates.
func (rs *relays) brokerDuplicates() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var n int64
	for _, p := range rs.all {
		n += p.pub.Duplicates()
	}
	return n
}

// stop stops every relay gracefully and closes its publisher.
func (rs *relays) stop() {
	rs.mu.Lock()
	all := rs.all
	rs.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = p.r.Stop(ctx) // an error: already stopped (crashed)
		})
	}
	wg.Wait()
	rs.dead.Wait()
	for _, p := range all {
		_ = p.pub.Close()
	}
}

// counts are what the subscribers' hooks observed.
type counts struct {
	handled, duplicates, failed atomic.Int64
}

// subscribe starts svc's subscriber: the durable consumer named after svc
// reads subject saga.<topic> and runs h through svc's inbox.
func subscribe(ctx context.Context, js jetstream.JetStream, svc *service, topic string, h inbox.Handler[*sql.Tx], c *counts, logger *slog.Logger) (*natspub.Subscriber[*sql.Tx], error) {
	sub, err := natspub.NewSubscriber(js, svc.in, h, &natspub.SubscriberConfig{
		Stream:            streamName,
		Durable:           svc.name,
		FilterSubjects:    []string{subjectPrefix + "." + topic},
		SubjectPrefix:     subjectPrefix,
		DeadLetterSubject: deadPrefix + "." + svc.name,
		AckWait:           ackWait,
		Options: subscribers.Options{
			Concurrency:     4,
			Backoff:         outbox.Backoff{Min: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2},
			ShutdownTimeout: 5 * time.Second,
			Logger:          logger.With("consumer", svc.name),
			Hooks: subscribers.Hooks{AfterSettle: func(st subscribers.Settlement) {
				switch {
				case st.Action != subscribers.ActionAck:
					c.failed.Add(1)
				case st.Outcome == inbox.Handled:
					c.handled.Add(1)
				case st.Outcome == inbox.Duplicate:
					c.duplicates.Add(1)
				}
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	if err := sub.Start(ctx); err != nil {
		return nil, err
	}
	return sub, nil
}

// backlog is how many messages a consumer has yet to settle: not delivered
// yet, or delivered and not acknowledged.
func backlog(ctx context.Context, js jetstream.JetStream, durable string) (uint64, error) {
	c, err := js.Consumer(ctx, streamName, durable)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}
