package sidekiq_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/sidekiq"
)

// fixedClock is a Clock stopped at one instant.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// TestRoutesAndFormat: each topic's job goes to its Route's class, queue
// and retry, or the defaults; the job carries the keys Sidekiq writes,
// with enqueued_at from the clock and created_at from the message; the
// queue is in the queues set; an unmapped topic without a default class
// fails alone, as permanent, naming the topic.
func TestRoutesAndFormat(t *testing.T) {
	rdb := connect(t)
	ns := newNamespace(t, rdb)
	now := time.Date(2026, 12, 1, 12, 0, 0, 250_000_000, time.UTC)
	pub := newPublisher(t, sidekiq.PublisherConfig{URL: redisURL(), Namespace: ns, Clock: fixedClock(now),
		Routes: map[string]sidekiq.Route{
			"orders":   {Class: "Billing::OrderJob", Queue: "critical", Retry: "5"},
			"mailings": {Class: "MailJob"}, // the default queue and retry
		}})
	defer pub.Close()
	created := now.Add(-time.Second)
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: "orders", Payload: []byte(`{"id":7}`), CreatedAt: created},
		{ID: outbox.NewID(), Topic: "unrouted", Payload: []byte(`{}`)},
		{ID: outbox.NewID(), Topic: "mailings", Payload: []byte("plain text"), CreatedAt: created},
	}
	errs := pub.Publish(context.Background(), msgs)
	for i, err := range errs {
		if i != 1 && err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if !publishers.IsPermanent(errs[1]) || !errors.Is(errs[1], sidekiq.ErrNoClass) || !strings.Contains(errs[1].Error(), `"unrouted"`) {
		t.Errorf("unrouted topic: %v, want a permanent ErrNoClass naming the topic", errs[1])
	}
	for _, c := range []struct {
		queue, class, retry string
		msg                 outbox.Message
	}{
		{"critical", "Billing::OrderJob", "5", msgs[0]},
		{sidekiq.DefaultQueue, "MailJob", "true", msgs[2]},
	} {
		jobs := readJobs(t, rdb, ns, c.queue, 1, 5*time.Second)
		if len(jobs) != 1 {
			t.Fatalf("queue %s: %d jobs, want 1", c.queue, len(jobs))
		}
		j := jobs[0]
		if j.Class != c.class || j.Queue != c.queue || string(j.Retry) != c.retry || j.JID != sidekiq.JID(c.msg.ID) {
			t.Errorf("queue %s: job %s: want class %s retry %s jid %s", c.queue, j.raw, c.class, c.retry, sidekiq.JID(c.msg.ID))
		}
		if j.CreatedAt == nil || !near(*j.CreatedAt, created) || j.EnqueuedAt == nil || !near(*j.EnqueuedAt, now) {
			t.Errorf("queue %s: job %s: created_at %v enqueued_at %v", c.queue, j.raw, j.CreatedAt, j.EnqueuedAt)
		}
		if got := string(j.payload(t)); got != string(c.msg.Payload) {
			t.Errorf("queue %s: payload %q, want %q", c.queue, got, c.msg.Payload)
		}
		if ok, _ := rdb.SIsMember(context.Background(), ns+":queues", c.queue).Result(); !ok {
			t.Errorf("queue %s is not in the queues set", c.queue)
		}
	}
}

// TestScheduled: a message whose NotBefore is ahead goes to the schedule
// set, scored with its time, without enqueued_at and without touching the
// queues; one whose NotBefore has passed goes to its queue.
func TestScheduled(t *testing.T) {
	rdb := connect(t)
	ns := newNamespace(t, rdb)
	now := time.Now()
	pub := newPublisher(t, sidekiq.PublisherConfig{URL: redisURL(), Namespace: ns, Class: "EventJob", Queue: "q", Clock: fixedClock(now)})
	defer pub.Close()
	at := now.Add(time.Hour).Truncate(time.Millisecond)
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: "t", NotBefore: at},
		{ID: outbox.NewID(), Topic: "t", NotBefore: now.Add(-time.Second)},
	}
	for i, err := range pub.Publish(context.Background(), msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	jobs := readJobs(t, rdb, ns, "q", 2, 5*time.Second)
	if len(jobs) != 2 || jobs[0].scheduled || !jobs[1].scheduled {
		t.Fatalf("read %+v: want the due job in the queue, the other in the schedule set", jobs)
	}
	if jobs[1].JID != sidekiq.JID(msgs[0].ID) || !near(jobs[1].score, at) {
		t.Errorf("scheduled job %s: score %f, want jid %s at %f", jobs[1].raw, jobs[1].score, sidekiq.JID(msgs[0].ID), float64(at.UnixNano())/1e9)
	}
	// The same message again: the same member, not a second job.
	for _, err := range pub.Publish(context.Background(), msgs[:1]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := rdb.ZCard(context.Background(), ns+":schedule").Result(); n != 1 {
		t.Errorf("the schedule set holds %d jobs after a re-send, want 1", n)
	}
}

// TestConfigRefused: NewPublisher names each field it refuses.
func TestConfigRefused(t *testing.T) {
	_, err := sidekiq.NewPublisher(&sidekiq.PublisherConfig{Class: "not a class", Retry: "maybe",
		Routes: map[string]sidekiq.Route{"t": {Class: "lower", Retry: "-1"}}})
	for _, want := range []string{`Class "not a class"`, `Retry: "maybe"`, `Routes["t"].Class "lower"`, `Routes["t"].Retry: "-1"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewPublisher: %v, want it to name %s", err, want)
		}
	}
}

// near reports whether f, Unix seconds as a float, is t to the
// microsecond.
func near(f float64, t time.Time) bool {
	return math.Abs(f-float64(t.UnixNano())/1e9) < 1e-6
}

// TestQueueFailsAlone: in a batch to two queues, a queue whose key Redis
// cannot push to (not a list) fails its own jobs, not as permanent, and
// the other queue's jobs are stored.
func TestQueueFailsAlone(t *testing.T) {
	rdb := connect(t)
	ns := newNamespace(t, rdb)
	ctx := context.Background()
	if err := rdb.Set(ctx, ns+":queue:broken", "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pub := newPublisher(t, sidekiq.PublisherConfig{URL: redisURL(), Namespace: ns, Class: "EventJob", Queue: "good",
		Routes: map[string]sidekiq.Route{"b": {Queue: "broken"}}})
	defer pub.Close()
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: "a"}, {ID: outbox.NewID(), Topic: "b"},
		{ID: outbox.NewID(), Topic: "a"}, {ID: outbox.NewID(), Topic: "b"},
	}
	errs := pub.Publish(ctx, msgs)
	for i, err := range errs {
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("message %d to the good queue: %v", i, err)
		case i%2 == 1 && (err == nil || publishers.IsPermanent(err) || !strings.Contains(err.Error(), "WRONGTYPE")):
			t.Errorf("message %d to the broken queue: %v, want a WRONGTYPE error, not permanent", i, err)
		}
	}
	jobs := readJobs(t, rdb, ns, "good", 2, 5*time.Second)
	if len(jobs) != 2 || jobs[0].JID != sidekiq.JID(msgs[0].ID) || jobs[1].JID != sidekiq.JID(msgs[2].ID) {
		t.Errorf("the good queue holds %d jobs, want messages 0 and 2 in order", len(jobs))
	}
}
