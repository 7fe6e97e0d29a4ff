package sqs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/tcpproxy"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/internal/testkit/subscribertest"
	"github.com/outboxgo/outbox/sqs"
)

func TestSubscriberConformance(t *testing.T) {
	subscribertest.Run(t, subHarness(false))
}

// TestSubscriberConformanceFIFO: on a FIFO queue the suite's messages, all
// of one key, are one group: one in flight at a time, so no Concurrency,
// and OrderPerKey at any concurrency.
func TestSubscriberConformanceFIFO(t *testing.T) {
	subscribertest.Run(t, subHarness(true))
}

func subHarness(fifo bool) subscribertest.Harness {
	return subscribertest.Harness{
		Setup: func(t *testing.T) subscribertest.Env {
			f := startFake(t)
			return newSubEnv(t, f, f.URL, fifo).env()
		},
		Outage: func(t *testing.T) subscribertest.Outage {
			f := startFake(t)
			px := tcpproxy.Start(t, strings.TrimPrefix(f.URL, "http://"))
			return subscribertest.Outage{Env: newSubEnv(t, f, "http://"+px.Addr, fifo).env(), Cut: px.Cut, Restore: px.Restore}
		},
		Features: subscribertest.Features{Concurrency: !fifo, OrderPerKey: fifo, HeldWhileDelivered: true, CountsDeliveries: true, Redelivers: true},
		Refusals: []subscribertest.Refusal{
			{Name: "unknown access key", New: func(t *testing.T, env subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				f := startFake(t)
				e := newSubEnv(t, f, f.URL, fifo)
				return refusedSub(t, e, client(t, f.URL, wrongCreds), c, e.queue)
			}},
			{Name: "queue does not exist", New: func(t *testing.T, env subscribertest.Env, c subscribertest.Config) (subscribertest.Subscriber, error) {
				f := startFake(t)
				e := newSubEnv(t, f, f.URL, fifo)
				return refusedSub(t, e, client(t, f.URL, creds), c, "missing-"+e.queue)
			}},
		},
	}
}

// client is an SDK client of endpoint with the given credentials, its
// idle connections closed at cleanup.
func client(t testing.TB, endpoint string, cp aws.CredentialsProvider) *awssqs.Client {
	t.Helper()
	c, closeIdle, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Region: "us-east-1", Endpoint: endpoint, Credentials: cp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeIdle)
	return c
}

// subEnv is one case's queues on a fake: queue and its dead-letter queue.
type subEnv struct {
	t          *testing.T
	f          *fake
	endpoint   string // the fake's, or a proxy's
	prefix     string
	queue, dlq string
	fifo       bool
	mu         sync.Mutex
	sent       map[string]int // event ID → copies sent, for a FIFO queue's
	plain      *awssqs.Client // straight to the fake, for the harness's own calls
}

func newSubEnv(t *testing.T, f *fake, endpoint string, fifo bool) *subEnv {
	e := &subEnv{t: t, f: f, endpoint: endpoint, prefix: newPrefix(), fifo: fifo, sent: map[string]int{}}
	e.queue, e.dlq = e.prefix+"orders", e.prefix+"dead" // the suite's topic
	if fifo {
		e.queue, e.dlq = e.queue+".fifo", e.dlq+".fifo"
	}
	f.CreateQueue(e.queue)
	f.CreateQueue(e.dlq)
	e.plain = client(t, f.URL, creds)
	return e
}

// visibility is the subscriber's visibility timeout for c.
func visibility(c subscribertest.Config) time.Duration {
	if c.RedeliverAfter > 0 {
		return max(c.RedeliverAfter.Round(time.Second), time.Second)
	}
	return 2 * time.Second
}

func (e *subEnv) config(c subscribertest.Config, queue string) *sqs.SubscriberConfig {
	return &sqs.SubscriberConfig{Options: c.Options, Queue: queue, DeadLetterQueue: e.dlq, QueuePrefix: e.prefix,
		VisibilityTimeout: visibility(c), WaitTime: 20 * time.Second, OpTimeout: 5 * time.Second}
}

func (e *subEnv) env() subscribertest.Env {
	return subscribertest.Env{
		New: func(t *testing.T, c subscribertest.Config) (subscribertest.Subscriber, error) {
			return sqs.NewSubscriber(client(t, e.endpoint, creds), c.Inbox, c.Handler, e.config(c, e.queue))
		},
		Publish: func(t *testing.T, msgs ...outbox.Message) {
			p, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: e.f.URL,
				Credentials: creds, QueuePrefix: e.prefix, FIFO: e.fifo})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			// One at a time: the suite's messages share a key, and its
			// copies of an event must each be stored.
			for _, m := range msgs {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				e.mu.Lock()
				n := e.sent[m.ID.String()]
				e.sent[m.ID.String()]++
				e.mu.Unlock()
				if n > 0 && e.fifo { // a copy: the queue would drop it within its window
					body, attrs, _ := sqs.EncodeForTest(&m)
					_, err := e.plain.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(e.url(e.queue)),
						MessageBody: aws.String(body), MessageAttributes: attrs, MessageGroupId: aws.String(sqs.GroupID(m.Key)),
						MessageDeduplicationId: aws.String(m.ID.String() + "-copy-" + strconv.Itoa(n))})
					cancel()
					if err != nil {
						t.Fatalf("SendMessage of a copy: %v", err)
					}
					continue
				}
				errs := p.Publish(ctx, []outbox.Message{m})
				cancel()
				if errs[0] != nil {
					t.Fatalf("publish: %v", errs[0])
				}
			}
		},
		PublishNoID: func(t *testing.T, payload string) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			in := &awssqs.SendMessageInput{QueueUrl: aws.String(e.url(e.queue)), MessageBody: aws.String(payload)}
			if e.fifo {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String("no-id"), aws.String(strconv.FormatInt(seq.Add(1), 10))
			}
			if _, err := e.plain.SendMessage(ctx, in); err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
		},
		Held: func(t *testing.T, _ string) int { return len(e.f.Messages(e.queue)) },
		DeadLetters: func(t *testing.T, n int, timeout time.Duration) []subscribertest.DeadLetter {
			deadline := time.Now().Add(timeout)
			for {
				msgs := e.f.Messages(e.dlq)
				if len(msgs) >= n || time.Now().After(deadline) {
					out := make([]subscribertest.DeadLetter, len(msgs))
					for i, m := range msgs {
						out[i] = deadLetterOf(t, m)
					}
					return out
				}
				time.Sleep(10 * time.Millisecond) // polling a condition, bounded by the deadline
			}
		},
		Source:   e.queue,
		Consumer: func(string) string { return e.queue },
		Orphan: func(t *testing.T, c subscribertest.Config, n int) {
			deadline := time.Now().Add(30 * time.Second)
			for got := 0; got < n; {
				if time.Now().After(deadline) {
					t.Fatalf("orphan: received %d of %d", got, n)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				out, err := e.plain.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(e.url(e.queue)),
					MaxNumberOfMessages: int32(n - got), WaitTimeSeconds: 1, VisibilityTimeout: int32(visibility(c) / time.Second)})
				cancel()
				if err != nil {
					t.Fatalf("orphan: ReceiveMessage: %v", err)
				}
				got += len(out.Messages)
			}
		},
	}
}

func (e *subEnv) url(queue string) string { return e.f.URL + "/" + sqsfake.Account + "/" + queue }

// deadLetterOf translates a dead letter by the attributes the package
// documents.
func deadLetterOf(t *testing.T, m sqsfake.Message) subscribertest.DeadLetter {
	val := func(k string) string {
		a := m.Attributes[k]
		if a.DataType == "Binary" {
			return string(a.BinaryValue)
		}
		return a.StringValue
	}
	d := subscribertest.DeadLetter{ID: val("outbox-id"), Error: val("outbox-error"), Source: val("outbox-dead-source"),
		Headers: map[string]string{}}
	d.Consumer = d.Source
	d.Deliveries, _ = strconv.Atoi(val("outbox-dead-deliveries"))
	switch val("outbox-body-encoding") {
	case "base64":
		p, _ := base64.StdEncoding.DecodeString(m.Body)
		d.Payload = string(p)
	case "empty":
	default:
		d.Payload = m.Body
	}
	if h := val("outbox-headers"); h != "" {
		if err := json.Unmarshal([]byte(h), &d.Headers); err != nil {
			t.Errorf("dead letter %s: outbox-headers: %v", m.ID, err)
		}
	}
	return d
}

// refusedSub is a subscriber of queue through cl; Start must fail with
// ErrRefused.
func refusedSub(t *testing.T, e *subEnv, cl *awssqs.Client, c subscribertest.Config, queue string) (subscribertest.Subscriber, error) {
	s, err := sqs.NewSubscriber(cl, c.Inbox, c.Handler, e.config(c, queue))
	if err != nil {
		return nil, err
	}
	return refusedStart{t, s}, nil
}

type refusedStart struct {
	t *testing.T
	subscribertest.Subscriber
}

func (r refusedStart) Start(ctx context.Context) error {
	err := r.Subscriber.Start(ctx)
	if err != nil && !errors.Is(err, sqs.ErrRefused) {
		r.t.Errorf("Start: %v: want an error wrapping ErrRefused", err)
	}
	return err
}
