package sqs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/sqs"
)

// TestPublishEntryFailures: a batch's Failed entries fail their own
// messages, classified by SenderFault and code; the later batches of a
// failed message's key in the call are not sent (its messages in the same
// batch SQS stores on their own); the rest are stored.
func TestPublishEntryFailures(t *testing.T) {
	s := sqsfake.New(sqsfake.Options{AccessKeys: []string{testAccessKey}, FailEntry: func(body string) (string, bool) {
		switch {
		case strings.HasPrefix(body, "sender"):
			return "InvalidParameterValue", true
		case strings.HasPrefix(body, "server"):
			return "InternalError", false
		case strings.HasPrefix(body, "denied"):
			return "AccessDenied", true
		}
		return "", false
	}})
	endpoint := newHTTPServer(t, s)
	prefix := newPrefix()
	s.CreateQueue(prefix + "events")
	p, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: endpoint,
		Credentials: creds, QueuePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	msg := func(key, body string) outbox.Message {
		return outbox.Message{ID: outbox.NewID(), Topic: "events", Key: key, Payload: []byte(body)}
	}
	msgs := []outbox.Message{
		msg("a", "sender-1"), msg("b", "server-1"), msg("c", "denied-1"), msg("", "ok-unkeyed"),
		msg("d", "ok-d"),
	}
	// Enough of key a after its failure to fill later batches.
	for i := range 12 {
		msgs = append(msgs, msg("a", fmt.Sprintf("ok-a-%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if !publishers.IsPermanent(errs[0]) {
		t.Errorf("sender fault: %v, want Permanent", errs[0])
	}
	if e := errs[1]; e == nil || publishers.IsPermanent(e) || publishers.IsMisconfigured(e) || publishers.IsUnavailable(e) {
		t.Errorf("no sender fault: %v, want a plain retryable error", e)
	}
	if !publishers.IsMisconfigured(errs[2]) {
		t.Errorf("AccessDenied: %v, want Misconfigured", errs[2])
	}
	for i := 3; i < 5; i++ {
		if errs[i] != nil {
			t.Errorf("message %d: %v", i, errs[i])
		}
	}
	stored := map[string]bool{}
	for _, m := range s.Messages(prefix + "events") {
		stored[m.Body] = true
	}
	unsent := 0
	for i := 5; i < len(msgs); i++ {
		switch err := errs[i]; {
		case err == nil && unsent > 0:
			t.Errorf("message %d of the failed key stored after an unsent one", i)
		case err == nil:
			if !stored[string(msgs[i].Payload)] {
				t.Errorf("message %d reported stored, not in the queue", i)
			}
		case publishers.IsPermanent(err) || !strings.Contains(err.Error(), "earlier message of its key failed"):
			t.Errorf("message %d of the failed key: %v, want unsent and retryable", i, err)
		default:
			unsent++
			if stored[string(msgs[i].Payload)] {
				t.Errorf("message %d reported unsent, in the queue", i)
			}
		}
	}
	if unsent == 0 {
		t.Error("every later message of the failed key was sent: no later batch was held back")
	}
	if !stored["ok-unkeyed"] || !stored["ok-d"] || stored["sender-1"] || stored["server-1"] || stored["denied-1"] {
		t.Errorf("stored %v", stored)
	}
}

// TestPublishMissingQueue: a topic without its queue fails as
// Misconfigured, and its messages only; a topic whose name no queue can
// have fails as Permanent.
func TestPublishMissingQueue(t *testing.T) {
	f := startFake(t)
	prefix := newPrefix()
	f.CreateQueue(prefix + "events")
	p, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: f.URL,
		Credentials: creds, QueuePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	msgs := []outbox.Message{
		{ID: outbox.NewID(), Topic: "events", Payload: []byte("x")},
		{ID: outbox.NewID(), Topic: "missing", Payload: []byte("x")},
		{ID: outbox.NewID(), Topic: "orders.placed", Payload: []byte("x")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := p.Publish(ctx, msgs)
	if errs[0] != nil || !publishers.IsMisconfigured(errs[1]) || !publishers.IsPermanent(errs[2]) {
		t.Fatalf("errors %v, want nil, Misconfigured, Permanent", errs)
	}
}

// TestPublishManyHeaders: an event with more headers than attributes
// arrives with all of them, the extra ones in outbox-headers.
func TestPublishManyHeaders(t *testing.T) {
	f := startFake(t)
	prefix := newPrefix()
	f.CreateQueue(prefix + "events")
	p, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: f.URL,
		Credentials: creds, QueuePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	m := outbox.Message{ID: outbox.NewID(), Topic: "events", Key: "k", Type: "T", Payload: []byte("x"),
		CreatedAt: time.Now().UTC(), Headers: map[string]string{}}
	for i := range 15 {
		m.Headers[fmt.Sprintf("h%02d", i)] = fmt.Sprint(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Publish(ctx, []outbox.Message{m})[0]; err != nil {
		t.Fatal(err)
	}
	got := f.Messages(prefix + "events")
	if len(got) != 1 || len(got[0].Attributes) != sqs.MaxAttributes || got[0].Attributes[sqs.AttrHeaders].StringValue == "" {
		t.Fatalf("stored %+v, want 10 attributes, %s among them", got, sqs.AttrHeaders)
	}
	r := translate(t, got[0])
	for k, v := range m.Headers {
		if r.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, r.Headers[k], v)
		}
	}
}
