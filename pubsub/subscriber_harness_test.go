package pubsub_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/pubsub"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env { return newSubEnv(t, nil, true).env() },
		// The outage cases run on subscriptions without message ordering:
		// the emulator holds an ordering key whose message's ack was lost
		// with a cut connection for minutes, past the suite's timeouts.
		//
		// And the outage holds the connections (a stall) rather than
		// closing them: the emulator (0.8.20) cannot take a cut streaming
		// pull. Its handler of a reset stream fails (NoSuchMethodError in
		// onRstStreamRead, in its log), so it keeps the dead stream and
		// goes on delivering to it; each message it sends there is lost
		// for the ack deadline, and the later message of the Outage case
		// came 10 s to more than 3 minutes late (CI, under load). A stall
		// still makes Pub/Sub unreachable while the handler commits, and
		// its acknowledgement late; Pub/Sub itself handles a cut stream,
		// and the client reconnects by itself (the publisher's outage
		// case cuts).
		Outage: func(t *testing.T) subscribertest.Outage {
			px := tcpproxy.Start(t, emulatorHost())
			e := newSubEnv(t, []option.ClientOption{option.WithEndpoint(px.Addr)}, false)
			return subscribertest.Outage{Env: e.env(),
				Cut: func() { px.Stall(true) }, Restore: func(testing.TB) { px.Stall(false) }}
		},
		// With message ordering on (as here), a key's messages are handled
		// one at a time: the suite's concurrency case, whose messages
		// share a key, cannot run more than one at once.
		Features: subscribertest.Features{OrderPerKey: true, Concurrency: true},
		Refusals: []subscribertest.Refusal{
			{Name: "missing subscription", New: func(t *testing.T, env subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				e := subEnvs.get(env.Source)
				return refusedSub(t, e, c, "no-such-subscription", e.dlqID)
			}},
			{Name: "missing dead-letter topic", New: func(t *testing.T, env subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				e := subEnvs.get(env.Source)
				return refusedSub(t, e, c, e.subscription(t, c.Group), "no-such-topic")
			}},
		},
	})
}

// refusedSub is a subscriber of c on subscription and dead-letter topic
// IDs; Start must fail, saying it was refused.
func refusedSub(t *testing.T, e *subEnv, c subscribertest.Config, sub, dlq string) (subscribertest.Subscriber, error) {
	s, err := pubsub.NewSubscriber(context.Background(), c.Inbox, c.Handler, &pubsub.SubscriberConfig{Options: c.Options,
		Project: e.w.project, Subscription: sub, DeadLetterTopic: dlq})
	if err != nil {
		return nil, err
	}
	return refusedStart{t, s}, nil
}

// refusedStart checks that Start's error wraps ErrRefused.
type refusedStart struct {
	t *testing.T
	subscribertest.Subscriber
}

func (r refusedStart) Start(ctx context.Context) error {
	err := r.Subscriber.Start(ctx)
	if err != nil && !errors.Is(err, pubsub.ErrRefused) {
		r.t.Errorf("Start: %v: want an error wrapping ErrRefused", err)
	}
	return err
}

// subEnvs finds an Env's subEnv by its Source, which is unique.
var subEnvs = &envIndex{m: map[string]*subEnv{}}

type envIndex struct {
	mu sync.Mutex
	m  map[string]*subEnv
}

func (x *envIndex) get(source string) *subEnv {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[source]
}

// subEnv is a topic, a dead-letter topic with a subscription the test
// reads, and one subscription (with message ordering) per group.
type subEnv struct {
	w       *world
	opts    []option.ClientOption // the subscribers'
	ordered bool                  // the subscriptions have message ordering on
	topicID string
	dlqID   string
	pub     *pubsub.Publisher
	dead    *collector

	mu   sync.Mutex
	subs map[string]string // group → subscription ID
}

func newSubEnv(t *testing.T, opts []option.ClientOption, ordered bool) *subEnv {
	w := newWorld(t)
	e := &subEnv{w: w, opts: opts, ordered: ordered, topicID: w.prefix + "orders", dlqID: w.prefix + "dead", subs: map[string]string{}}
	w.createTopic(t, "orders")
	dlq := w.createTopic(t, "dead")
	e.dead = w.collect(t, w.createSub(t, dlq, w.prefix+"dead-reader", nil))
	// Pub/Sub gives a subscription the messages published after it was
	// made: the case's groups get theirs before anything is published.
	groups, ok := caseGroups[path.Base(t.Name())]
	if !ok {
		groups = suiteGroups
	}
	for _, g := range groups {
		e.subscription(t, g)
	}
	e.pub = newPublisher(t, pubsub.PublisherConfig{Project: w.project, TopicPrefix: w.prefix})
	t.Cleanup(func() { _ = e.pub.Close() })
	subEnvs.mu.Lock()
	subEnvs.m[e.topicID] = e
	subEnvs.mu.Unlock()
	return e
}

// caseGroups are the groups each case of the suite uses, by its name.
var caseGroups = map[string][]string{
	"Delivery": {"delivery"}, "HostileKeyAndType": {"hostile"}, "DuplicateHasOneEffect": {"dedup"},
	"RetryThenSucceed": {"retry"}, "AckAfterCommit": {"commit"}, "DeadLetters": {"dlq"}, "Order": {"order"},
	"OrderPerKey": {"keys"}, "Concurrency": {"concurrent"}, "SharedGroup": {"shared"}, "Resume": {"resume"},
	"GracefulStop": {"stop"}, "HardStop": {"hard"}, "RunUntilCancelled": {"run"}, "Lifecycle": {"life"},
	"Orphan": {"orphan"}, "OrphanPastMaxDeliveries": {"orphan"}, "SlowHandlerKeepsMessage": {"slow"},
	"Outage": {"outage"}, "StopDuringOutage": {"stop-outage"},
	"missing_subscription": {"refused"}, "missing_dead-letter_topic": {"refused"},
}

// suiteGroups are the groups the suite's cases use, for a case not in
// caseGroups.
var suiteGroups = []string{"commit", "concurrent", "dedup", "delivery", "dlq", "hard", "hostile", "keys", "life",
	"order", "orphan", "outage", "refused", "resume", "retry", "run", "shared", "slow", "stop", "stop-outage"}

// subscription returns the ID of group's subscription, created at first.
func (e *subEnv) subscription(t *testing.T, group string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, ok := e.subs[group]; ok {
		return id
	}
	id := e.w.prefix + "sub-" + group
	e.w.createSub(t, e.w.topicName(e.topicID), id, func(s *pb.Subscription) { s.EnableMessageOrdering = e.ordered })
	e.subs[group] = id
	return id
}

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{
		New: func(t *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
			if os.Getenv("DEBUGSUB") != "" {
				c.Options.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			return pubsub.NewSubscriber(context.Background(), c.Inbox, c.Handler, &pubsub.SubscriberConfig{Options: c.Options,
				Project: e.w.project, Subscription: e.subscription(t, c.Group), DeadLetterTopic: e.dlqID,
				TopicPrefix: e.w.prefix, ClientOptions: e.opts})
		},
		Publish: func(t *testing.T, msgs ...outbox.Message) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, err := range e.pub.Publish(ctx, msgs) {
				if err != nil {
					t.Fatalf("publish message %d: %v", i, err)
				}
			}
		},
		PublishNoID: func(t *testing.T, payload string) {
			_, err := e.w.client.TopicAdminClient.Publish(tctx(t), &pb.PublishRequest{Topic: e.w.topicName(e.topicID),
				Messages: []*pb.PubsubMessage{{Data: []byte(payload), Attributes: map[string]string{"note": "no id"}}}})
			if err != nil {
				t.Fatalf("publish without ID: %v", err)
			}
		},
		Held: func(t *testing.T, group string) int { return e.held(t, e.subscription(t, group)) },
		DeadLetters: func(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
			var out []subscribertest.DeadLetter
			for _, m := range e.dead.wait(n, timeout) {
				d, _ := strconv.Atoi(m.Attributes[pubsub.AttrDeadDeliveries])
				out = append(out, subscribertest.DeadLetter{ID: m.Attributes[pubsub.AttrID], Payload: string(m.Data),
					Headers: m.Attributes, Error: m.Attributes[pubsub.AttrError], Deliveries: d,
					Source: m.Attributes[pubsub.AttrDeadTopic], Consumer: m.Attributes[pubsub.AttrDeadSubscription]})
			}
			return out
		},
		Orphan:   func(t *testing.T, c subscribertest.Config, n int) { e.orphan(t, e.subscription(t, c.Group), n) },
		Source:   e.topicID,
		Consumer: func(group string) string { return e.w.subName(e.w.prefix + "sub-" + group) },
	}
}

// held counts the messages the subscription has ready for delivery: it
// pulls (without waiting) until no pull has found anything for
// heldQuiet, then hands every pulled message back. (The emulator makes a
// message handed back on a stream that closes ready again a moment later,
// and a waiting pull does not wake for it.)
func (e *subEnv) held(t *testing.T, subID string) int {
	name := e.w.subName(subID)
	seen := map[string]bool{}
	var ackIDs []string
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for quiet := time.Now().Add(heldQuiet); time.Now().Before(quiet); <-tick.C {
		// The emulator sometimes holds even such a pull (a key of an
		// ordered subscription being handed back): a bounded one that ends
		// found nothing.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := e.w.client.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: name, MaxMessages: 1000,
			ReturnImmediately: true}) //nolint:staticcheck // deprecated, but the way not to wait
		timedOut := ctx.Err() != nil
		cancel()
		if err != nil && !timedOut && status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("pull %s: %v", name, err)
		}
		for _, m := range resp.GetReceivedMessages() {
			seen[m.GetMessage().GetMessageId()] = true
			ackIDs = append(ackIDs, m.GetAckId())
			quiet = time.Now().Add(heldQuiet)
		}
	}
	if len(ackIDs) > 0 {
		if err := e.w.client.SubscriptionAdminClient.ModifyAckDeadline(tctx(t), &pb.ModifyAckDeadlineRequest{
			Subscription: name, AckIds: ackIDs, AckDeadlineSeconds: 0}); err != nil {
			t.Fatalf("hand back what was pulled: %v", err)
		}
	}
	return len(seen)
}

// heldQuiet is how long held pulls without finding anything before it
// counts.
const heldQuiet = 5 * time.Second

// orphan pulls n messages of the subscription and leaves them
// unacknowledged, as a consumer that died would: Pub/Sub delivers them
// again once their ack deadline (10 s) has passed.
func (e *subEnv) orphan(t *testing.T, subID string, n int) {
	name := e.w.subName(subID)
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < n {
		if time.Now().After(deadline) {
			t.Fatalf("orphan: pulled %d of %d messages", len(seen), n)
		}
		resp, err := e.w.client.SubscriptionAdminClient.Pull(tctx(t), &pb.PullRequest{Subscription: name, MaxMessages: int32(n - len(seen))})
		if err != nil {
			t.Fatalf("orphan: pull %s: %v", name, err)
		}
		for _, m := range resp.GetReceivedMessages() {
			seen[m.GetMessage().GetMessageId()] = true
		}
	}
}
