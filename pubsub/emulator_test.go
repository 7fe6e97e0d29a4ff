package pubsub_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/outboxgo/outbox/pubsub"
)

// world is a project of the emulator no other test uses, with a client
// of it, closed at cleanup.
type world struct {
	project string
	prefix  string // a topic prefix of this test's own
	client  *gpubsub.Client
}

// newWorld returns a fresh world, or ends the test without the emulator.
func newWorld(t testing.TB) *world {
	t.Helper()
	requireEmulator(t)
	n := seq.Add(1)
	w := &world{project: fmt.Sprintf("outbox-test-%d-%d", os.Getpid(), n), prefix: fmt.Sprintf("t%d-%d-", os.Getpid(), n)}
	c, err := gpubsub.NewClient(context.Background(), w.project)
	if err != nil {
		t.Fatalf("pubsub.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w.client = c
	return w
}

func (w *world) topicName(id string) string {
	return fmt.Sprintf("projects/%s/topics/%s", w.project, id)
}

func (w *world) subName(id string) string {
	return fmt.Sprintf("projects/%s/subscriptions/%s", w.project, id)
}

// createTopic creates the Pub/Sub topic prefix+topic.
func (w *world) createTopic(t testing.TB, topic string) string {
	t.Helper()
	name := w.topicName(w.prefix + topic)
	if _, err := w.client.TopicAdminClient.CreateTopic(tctx(t), &pb.Topic{Name: name}); err != nil {
		t.Fatalf("CreateTopic %s: %v", name, err)
	}
	t.Cleanup(func() { // the emulator keeps everything until it stops
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.client.TopicAdminClient.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: name})
	})
	return name
}

// createSub creates an ordering subscription of the topic name.
func (w *world) createSub(t testing.TB, topicName, id string, mod func(*pb.Subscription)) string {
	t.Helper()
	s := &pb.Subscription{Name: w.subName(id), Topic: topicName, EnableMessageOrdering: true, AckDeadlineSeconds: 10}
	if mod != nil {
		mod(s)
	}
	if _, err := w.client.SubscriptionAdminClient.CreateSubscription(tctx(t), s); err != nil {
		t.Fatalf("CreateSubscription %s: %v", s.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pb.DeleteSubscriptionRequest{Subscription: s.Name})
	})
	return s.Name
}

// tctx is a context for one admin call.
func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// collector receives a subscription, from its first wait on, acking
// every message, until cleanup. (It starts late so that a test counting
// the publisher's goroutines does not count the reader's.)
type collector struct {
	start   func()
	once    sync.Once
	mu      sync.Mutex
	got     []*gpubsub.Message
	changed chan struct{}
}

// collect returns a collector of the subscription name.
func (w *world) collect(t testing.TB, name string) *collector {
	c := &collector{changed: make(chan struct{})}
	c.start = func() { w.receive(t, name, c) }
	return c
}

// receive starts c's Receive, stopped at cleanup.
func (w *world) receive(t testing.TB, name string, c *collector) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	sub := w.client.Subscriber(name)
	sub.ReceiveSettings.NumGoroutines = 1
	go func() {
		done <- sub.Receive(ctx, func(_ context.Context, m *gpubsub.Message) {
			c.mu.Lock()
			c.got = append(c.got, m)
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
			m.Ack()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Receive %s: %v", name, err)
		}
	})
}

// wait returns what arrived once at least n messages did or timeout
// passed.
func (c *collector) wait(n int, timeout time.Duration) []*gpubsub.Message {
	c.once.Do(c.start)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, changed := slices.Clone(c.got), c.changed
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			return got
		}
	}
}

// waitDistinct is wait for n messages of distinct outbox IDs (a re-sent
// message arrives twice).
func (c *collector) waitDistinct(n int, timeout time.Duration) []*gpubsub.Message {
	deadline := time.Now().Add(timeout)
	for want := n; ; want++ {
		got := c.wait(want, time.Until(deadline))
		ids := map[string]bool{}
		for _, m := range got {
			ids[m.Attributes[pubsub.AttrID]] = true
		}
		if len(ids) >= n || len(got) < want {
			return got
		}
	}
}
