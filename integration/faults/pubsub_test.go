package faults

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/inbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testenv"
	"github.com/outboxgo/outbox/publishers"
	pubsubpub "github.com/outboxgo/outbox/pubsub"
	"github.com/outboxgo/outbox/subscribers"
)

// The Pub/Sub run's environment, besides envBroker (the relays' way to the
// emulator: the proxy, which they get as PUBSUB_EMULATOR_HOST),
// envBrokerDir (the emulator's own address, the inbox's) and envPrefix (the
// publisher's TopicPrefix).
const (
	envPubsubProject = "OUTBOX_FAULTS_PUBSUB_PROJECT"
	envPubsubInbox   = "OUTBOX_FAULTS_PUBSUB_INBOX" // the inbox's subscription
	envPubsubDLQ     = "OUTBOX_FAULTS_PUBSUB_DLQ"   // the inbox's dead-letter topic
)

const (
	pubsubProject = "outbox-faults"
	pubsubPrefix  = "faults-"
)

// pubsubBroker is a private Pub/Sub emulator (pubsubEmulator), with the
// topic pubsubPrefix+"orders" and two subscriptions of it, the checker's
// (message ordering on: per-key order is checked on it) and the inbox's,
// and the inbox's dead-letter topic. The inbox's subscription has no
// message ordering: on an ordered subscription, each key a SIGKILLed
// consumer had leased is held until the lease ends (10 s at least), and
// the suite kills the inbox's consumer every few seconds, which starves
// it; the inbox is checked for exactly-once effects, not for order. The relays publish through a proxy (the pubsub publisher, per-key
// order on: the outbox Key is the ordering key); the checker and the
// inbox's consumer talk to the emulator directly.
//
// The emulator keeps messages in memory only: killed and started again it
// has lost its topics, its subscriptions and every message not yet
// consumed. A real Pub/Sub does not lose what it acknowledged; the
// emulator does, and the suite must not blame the outbox for that, nor let
// it hide a loss. So the checker is a consumer that runs all along,
// recording what arrives (id, in delivery order) and acknowledging it, and
// the outage is injected only once nothing the outbox marked published is
// left in the emulator alone (see stop): whatever the restart then drops
// was never marked, so the relays publish it again. "lost 0" keeps its
// meaning: every event the outbox marked published had reached the
// checker and the inbox.
type pubsubBroker struct {
	t   testing.TB
	emu *pubsubEmulator
	db  *pgDatabase // the catch-up before an outage reads the outbox's marks
	px  *tcpproxy.Proxy

	admin   *gpubsub.Client // the checker's and the topology's, direct
	checker *pubsubChecker
}

func (b *pubsubBroker) topic(id string) string {
	return "projects/" + pubsubProject + "/topics/" + pubsubPrefix + id
}

func (b *pubsubBroker) sub(id string) string {
	return "projects/" + pubsubProject + "/subscriptions/" + pubsubPrefix + id
}

func newPubsub(t *testing.T, db *pgDatabase) *pubsubBroker {
	t.Helper()
	emu, err := startPubsubEmulator(t)
	if err != nil {
		testenv.Unreachable(t, "a private Google Pub/Sub emulator (gcloud beta emulators pubsub start, Java)", err)
	}
	b := &pubsubBroker{t: t, emu: emu, db: db}
	b.admin, err = emu.client(context.Background(), pubsubProject)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.admin.Close() })
	if err := b.createTopology(); err != nil {
		t.Fatal(err)
	}
	b.checker = startPubsubChecker(t, b.admin, b.sub("check"))
	b.px = tcpproxy.Start(t, emu.addr())
	return b
}

// createTopology creates the topics and subscriptions, on a fresh
// emulator: before any relay can reach it, since Pub/Sub accepts and
// drops what a topic without subscriptions receives.
func (b *pubsubBroker) createTopology() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"orders", "inbox-dead"} {
		if _, err := b.admin.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: b.topic(id)}); err != nil {
			return fmt.Errorf("create topic %s: %w", b.topic(id), err)
		}
	}
	for _, s := range []*pb.Subscription{
		{Name: b.sub("check"), Topic: b.topic("orders"), EnableMessageOrdering: true, AckDeadlineSeconds: 10},
		// Unordered (see pubsubBroker): a killed consumer of an ordered
		// subscription holds each key it had leased for the lease.
		{Name: b.sub("inbox"), Topic: b.topic("orders"), AckDeadlineSeconds: 10},
		{Name: b.sub("dead"), Topic: b.topic("inbox-dead"), AckDeadlineSeconds: 10},
	} {
		if _, err := b.admin.SubscriptionAdminClient.CreateSubscription(ctx, s); err != nil {
			return fmt.Errorf("create subscription %s: %w", s.Name, err)
		}
	}
	return nil
}

func (b *pubsubBroker) name() string           { return "Google Pub/Sub emulator" }
func (b *pubsubBroker) proxy() *tcpproxy.Proxy { return b.px }

func (b *pubsubBroker) env() []string {
	return []string{envBrokerKind + "=pubsub", envBroker + "=" + b.px.Addr, envBrokerDir + "=" + b.emu.addr(),
		envPrefix + "=" + pubsubPrefix, envPubsubProject + "=" + pubsubProject,
		envPubsubInbox + "=" + b.sub("inbox"), envPubsubDLQ + "=" + b.topic("inbox-dead")}
}

// stop kills the emulator (SIGKILL of its process group), once nothing the
// outbox marked published lives in the emulator alone: the proxy is cut
// (no relay gets an acknowledgement any more), every relay transaction
// open at the cut has ended (a claim is marked in the transaction that
// claimed it, so no acknowledged batch is still to be marked), and every
// event marked published has reached the checker and has its effect from
// the inbox. The deadline is on progress: the catch-up fails when the
// events still missing have not fallen for 90 s.
func (b *pubsubBroker) stop() error {
	b.px.Cut()
	ctx := context.Background()
	var cut time.Time
	if err := b.db.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&cut); err != nil {
		return fmt.Errorf("the database's clock at the cut: %w", err)
	}
	begin := time.Now()
	best, bestAt := -1, time.Now()
	var marked int
	for {
		open, notChecked, notApplied, n, err := b.catchUp(ctx, cut)
		missing := notChecked + notApplied
		marked = n
		if err == nil && open == 0 && missing == 0 {
			break
		}
		if err == nil && (best < 0 || open+missing < best) {
			best, bestAt = open+missing, time.Now()
		}
		if time.Since(bestAt) > 90*time.Second {
			return fmt.Errorf("before the outage: %d relay transactions open since the cut; of %d published events, %d not yet at the checker, %d without their effect from the inbox; no progress for 90s (%v)",
				open, marked, notChecked, notApplied, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Logf("pubsub: killing the emulator, %d published events at the checker and the inbox (caught up in %v)",
		marked, time.Since(begin).Round(time.Millisecond))
	b.emu.kill()
	return nil
}

// catchUp says how far the checker and the inbox are from the outbox's
// marks: relay transactions open since before cut, events marked
// published that the checker has not received and that the inbox has not
// applied, and how many are marked.
func (b *pubsubBroker) catchUp(ctx context.Context, cut time.Time) (open, notChecked, notApplied, marked int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d := b.db
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND xact_start <= $2 AND pid <> pg_backend_pid()`, d.appName, cut).Scan(&open); err != nil {
		return 0, 0, 0, 0, err
	}
	// Marked: committed (in the log) and neither pending nor dead (kept
	// published, or deleted).
	rows, err := d.pool.Query(ctx, `SELECT l.id, EXISTS (SELECT FROM `+d.q("effects")+` e WHERE e.msg_id = l.id)
		FROM `+d.q("log")+` l LEFT JOIN `+d.q("messages")+` m ON m.id = l.id
		WHERE m.id IS NULL OR m.status = 1`)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer rows.Close()
	seen := b.checker.seenSet()
	for rows.Next() {
		var (
			id     uuid.UUID
			effect bool
		)
		if err := rows.Scan(&id, &effect); err != nil {
			return 0, 0, 0, 0, err
		}
		marked++
		if !seen[id] {
			notChecked++
		}
		if !effect {
			notApplied++
		}
	}
	return open, notChecked, notApplied, marked, rows.Err()
}

// start starts the emulator again on the same port, creates the topology
// anew, and only then lets the relays through the proxy again.
func (b *pubsubBroker) start() error {
	if err := b.emu.start(); err != nil {
		return err
	}
	if err := b.createTopology(); err != nil {
		return err
	}
	b.px.Restore(b.t)
	return nil
}

// badInput: what the pubsub publisher refuses for good (Permanent) before
// sending, against Pub/Sub's limits; the emulator itself is not asked.
// Pub/Sub's 10 MB message is out of reach (Enqueue refuses a payload over
// the outbox's own 1 MiB), and an ordering key over 1,024 bytes is refused
// too, but the suite's keyed bad input shares one key (badKey): the pubsub
// package tests both.
func (b *pubsubBroker) badInput() []badCase {
	many := map[string]string{}
	for i := range 100 {
		many[fmt.Sprintf("h%d", i)] = "x"
	}
	return []badCase{
		{"a 2,000-byte header value over Pub/Sub's 1,024-byte attribute value", `attribute "big" is 2000 bytes, limit 1024`,
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"),
				Headers: map[string]string{"big": strings.Repeat("v", 2000)}}},
		{"100 headers: with the publisher's own, over Pub/Sub's 100 attributes", "(100 headers), limit 100",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"), Headers: many}},
		{"a header named goog-trace: Pub/Sub reserves attribute names starting with goog", "Pub/Sub reserves names starting with goog",
			outbox.Message{Topic: "orders", Key: badKey, Type: "Bad", Payload: []byte("{}"),
				Headers: map[string]string{"goog-trace": "x"}}},
		{"a topic that is no Pub/Sub topic ID, unkeyed", "is no Pub/Sub topic ID",
			outbox.Message{Topic: "bad topic", Type: "Bad", Payload: []byte("{}")}},
	}
}

// consume returns what the checker received, in delivery order, once it
// has want distinct events or ctx ends.
func (b *pubsubBroker) consume(ctx context.Context, want int) ([]uuid.UUID, error) {
	return b.checker.wait(ctx, want), nil
}

// inboxBacklog pulls the inbox's subscription once (asked with the inbox
// process killed), counts what it is handed and hands it straight back
// (ack deadline 0), and fails on a dead letter. Best effort: a message the
// killed process had leased comes back only when its lease ends (at most
// 10 s), and a pull may return before it has everything. The effects
// table, checked next, is what proves each effect happened exactly once.
func (b *pubsubBroker) inboxBacklog(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := b.pullBack(ctx, b.sub("inbox"))
	if err != nil {
		return n, err
	}
	dead, err := b.pullBack(ctx, b.sub("dead"))
	if err != nil {
		return n, err
	}
	if dead > 0 {
		// A dead letter is an effect that will never be applied: say so
		// rather than wait for it.
		return n, fmt.Errorf("the inbox dead-lettered %d messages", dead)
	}
	return n, nil
}

// pullBack pulls what sub has at once and gives it back.
func (b *pubsubBroker) pullBack(ctx context.Context, sub string) (int, error) {
	sa := b.admin.SubscriptionAdminClient
	//nolint:staticcheck // ReturnImmediately: a count of what is there now, not a wait for more
	resp, err := sa.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 1000, ReturnImmediately: true})
	if err != nil {
		return 0, fmt.Errorf("pull %s: %w", sub, err)
	}
	ids := make([]string, 0, len(resp.GetReceivedMessages()))
	for _, m := range resp.GetReceivedMessages() {
		ids = append(ids, m.GetAckId())
	}
	if len(ids) > 0 {
		if err := sa.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: sub, AckIds: ids}); err != nil {
			return len(ids), fmt.Errorf("hand back the pull of %s: %w", sub, err)
		}
	}
	return len(ids), nil
}

// republished: Pub/Sub does not drop re-publishes (the event ID is an
// attribute, for the inbox); they reach the checker as duplicates.
func (b *pubsubBroker) republished() (int, bool) { return 0, false }

// sparesInbox implements inboxSparer: the emulator keeps, some for good,
// the messages a SIGKILLed streaming-pull consumer held (it leases a new
// consumer the whole backlog at once), so a killed inbox consumer would
// stall the inbox on the emulator's account, not ours; the relays are
// still SIGKILLed and the emulator itself killed and restarted.
func (b *pubsubBroker) sparesInbox() string {
	return "the emulator does not redeliver a SIGKILLed consumer's leases (TestPubsubEmulatorDroppedLeases)"
}

// pubsubChecker is the run's plain consumer of the checker's subscription:
// Google's client with one streaming pull, recording each message's event
// ID in delivery order (a key's in order: the subscription orders) and
// acknowledging it. It runs from the start to the end of the run, through
// the outages (a streaming pull that ends is started again).
type pubsubChecker struct {
	mu      sync.Mutex
	ids     []uuid.UUID
	seen    map[uuid.UUID]bool
	bad     []string
	changed chan struct{}
}

func startPubsubChecker(t testing.TB, c *gpubsub.Client, sub string) *pubsubChecker {
	k := &pubsubChecker{seen: map[uuid.UUID]bool{}, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := c.Subscriber(sub)
		s.ReceiveSettings.NumGoroutines = 1
		s.ReceiveSettings.MaxOutstandingMessages = 1000
		for ctx.Err() == nil {
			_ = s.Receive(ctx, k.record) // ends on NotFound while the emulator is being set up again
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, b := range k.bad {
			t.Errorf("pubsub checker: %s", b)
		}
	})
	return k
}

func (k *pubsubChecker) record(_ context.Context, m *gpubsub.Message) {
	id, err := uuid.Parse(m.Attributes[pubsubpub.AttrID])
	k.mu.Lock()
	if err != nil {
		k.bad = append(k.bad, fmt.Sprintf("message %s with %s %q", m.ID, pubsubpub.AttrID, m.Attributes[pubsubpub.AttrID]))
	} else {
		k.ids = append(k.ids, id)
		k.seen[id] = true
		close(k.changed)
		k.changed = make(chan struct{})
	}
	k.mu.Unlock()
	m.Ack()
}

// seenSet is a copy of the IDs received so far.
func (k *pubsubChecker) seenSet() map[uuid.UUID]bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := make(map[uuid.UUID]bool, len(k.seen))
	for id := range k.seen {
		s[id] = true
	}
	return s
}

// wait returns every ID received, in order, once want distinct ones have
// arrived or ctx ends.
func (k *pubsubChecker) wait(ctx context.Context, want int) []uuid.UUID {
	for {
		k.mu.Lock()
		ids, n, changed := slices.Clone(k.ids), len(k.seen), k.changed
		k.mu.Unlock()
		if n >= want {
			return ids
		}
		select {
		case <-ctx.Done():
			return ids // what is missing is lost
		case <-changed:
		}
	}
}

// pubsubRelayPublisher is the relay process's publisher, through the proxy
// (PUBSUB_EMULATOR_HOST). The client connects lazily: a relay started
// while the emulator or the path to it is down starts anyway. The
// client's own retries of a batch end after 5 s (PublishTimeout), so a
// key is not held long after an outage.
func pubsubRelayPublisher(log *slog.Logger) (publishers.Publisher, error) {
	if err := os.Setenv("PUBSUB_EMULATOR_HOST", os.Getenv(envBroker)); err != nil {
		return nil, err
	}
	return pubsubpub.NewPublisher(context.Background(), &pubsubpub.PublisherConfig{Project: os.Getenv(envPubsubProject),
		TopicPrefix: os.Getenv(envPrefix), PublishTimeout: 5 * time.Second, Logger: log})
}

// pubsubSubscribe starts the inbox process's subscriber on the inbox's
// subscription, straight to the emulator, with MaxDeliveries 10,000 so
// that a database restart cannot dead-letter an effect. Start fails while
// the emulator is down or not yet set up again (it checks the subscription
// and the dead-letter topic) and closes the client it made: each attempt
// makes a new subscriber. After that the subscriber's streaming pull rides
// out outages by itself.
func pubsubSubscribe(ctx context.Context, in *inbox.Inbox[*sql.Tx], h inbox.Handler[*sql.Tx]) error {
	if err := os.Setenv("PUBSUB_EMULATOR_HOST", os.Getenv(envBrokerDir)); err != nil {
		return err
	}
	return startRetrying(ctx, func(ctx context.Context) error {
		sub, err := pubsubpub.NewSubscriber(ctx, in, h, &pubsubpub.SubscriberConfig{Project: os.Getenv(envPubsubProject),
			Subscription: os.Getenv(envPubsubInbox), DeadLetterTopic: os.Getenv(envPubsubDLQ),
			TopicPrefix: os.Getenv(envPrefix), OpTimeout: 2 * time.Second,
			Options: subscribers.Options{MaxDeliveries: 10000,
				Backoff:     outbox.Backoff{Min: 20 * time.Millisecond, Max: 500 * time.Millisecond, Jitter: 0.2},
				Concurrency: 4, ShutdownTimeout: 5 * time.Second,
				Logger: helperLogger(), Hooks: subscribers.Hooks{AfterCommit: printDup}}})
		if err != nil {
			return err
		}
		return sub.Start(ctx)
	})
}
