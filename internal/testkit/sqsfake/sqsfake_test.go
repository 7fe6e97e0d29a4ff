package sqsfake_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
)

// client is an SDK client of a fresh fake that accepts only key "good".
func client(t *testing.T, key string) (*sqs.Client, *sqsfake.Server) {
	s := sqsfake.New(sqsfake.Options{AccessKeys: []string{"good"}})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), HTTPClient: &http.Client{Transport: tr},
		Credentials: credentials.NewStaticCredentialsProvider(key, "secret", "")})
	return c, s
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRefusesUnknownKey(t *testing.T) {
	c, _ := client(t, "bad")
	_, err := c.ListQueues(ctx(t), &sqs.ListQueuesInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidClientTokenId" {
		t.Fatalf("ListQueues with an unknown key = %v, want InvalidClientTokenId", err)
	}
}

func TestQueueDoesNotExist(t *testing.T) {
	c, _ := client(t, "good")
	_, err := c.GetQueueUrl(ctx(t), &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var nq *types.QueueDoesNotExist
	var ae smithy.APIError
	if !errors.As(err, &nq) || !errors.As(err, &ae) || ae.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Fatalf("GetQueueUrl of no queue = %v, want QueueDoesNotExist with the query code", err)
	}
}

// TestFIFO: a group's next message waits while one is in flight, other
// groups go on; a re-sent deduplication ID is accepted and not stored.
func TestFIFO(t *testing.T) {
	c, s := client(t, "good")
	out, err := c.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("q.fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	q := out.QueueUrl
	send := func(group, dedup string) {
		t.Helper()
		if _, err := c.SendMessage(ctx(t), &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(group + dedup),
			MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup)}); err != nil {
			t.Fatal(err)
		}
	}
	send("a", "1")
	send("a", "2")
	send("b", "3")
	send("a", "1") // a duplicate
	if n := len(s.Messages("q.fifo")); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
	recv := func() []types.Message {
		t.Helper()
		r, err := c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 1, VisibilityTimeout: 30,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Messages
	}
	first := recv()
	if len(first) != 1 || aws.ToString(first[0].Body) != "a1" {
		t.Fatalf("first receive %v, want a1", first)
	}
	second := recv()
	if len(second) != 1 || aws.ToString(second[0].Body) != "b3" {
		t.Fatalf("second receive %v, want b3 (a2 waits behind a1)", second)
	}
	if third := recv(); len(third) != 0 {
		t.Fatalf("third receive %v, want nothing while a1 is in flight", third)
	}
	if _, err := c.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: q, ReceiptHandle: first[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if next := recv(); len(next) != 1 || aws.ToString(next[0].Body) != "a2" {
		t.Fatalf("after a1's delete: %v, want a2", next)
	}
}

// TestLongPollAndVisibility: a long poll returns when a message arrives;
// a message whose visibility lapses comes back with its receive count up.
func TestLongPollAndVisibility(t *testing.T) {
	c, _ := client(t, "good")
	out, err := c.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	q := out.QueueUrl
	got := make(chan []types.Message, 1)
	go func() {
		r, err := c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: q, WaitTimeSeconds: 20, VisibilityTimeout: 1})
		if err != nil {
			t.Error(err)
		}
		got <- r.Messages
	}()
	if _, err := c.SendMessage(ctx(t), &sqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	select {
	case msgs := <-got:
		if len(msgs) != 1 {
			t.Fatalf("long poll got %v", msgs)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not return when the message arrived")
	}
	r, err := c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: q, WaitTimeSeconds: 5,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Messages) != 1 || r.Messages[0].Attributes["ApproximateReceiveCount"] != "2" {
		t.Fatalf("after the visibility lapsed: %+v, want the message, received twice", r.Messages)
	}
}

// TestBatchLimits: more than 10 entries fail the call; a message over the
// size limit fails its entry with SenderFault.
func TestBatchLimits(t *testing.T) {
	c, _ := client(t, "good")
	out, err := c.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	var entries []types.SendMessageBatchRequestEntry
	for i := range 11 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(string(rune('a' + i))), MessageBody: aws.String("m")})
	}
	_, err = c.SendMessageBatch(ctx(t), &sqs.SendMessageBatchInput{QueueUrl: out.QueueUrl, Entries: entries})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AWS.SimpleQueueService.TooManyEntriesInBatchRequest" {
		t.Fatalf("11 entries: %v", err)
	}
	attrs := map[string]types.MessageAttributeValue{}
	for i := range 11 {
		attrs[string(rune('a'+i))] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("v")}
	}
	r, err := c.SendMessageBatch(ctx(t), &sqs.SendMessageBatchInput{QueueUrl: out.QueueUrl, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("ok"), MessageBody: aws.String("m")},
		{Id: aws.String("attrs"), MessageBody: aws.String("m"), MessageAttributes: attrs},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Successful) != 1 || len(r.Failed) != 1 || !r.Failed[0].SenderFault || aws.ToString(r.Failed[0].Id) != "attrs" {
		t.Fatalf("successful %+v failed %+v", r.Successful, r.Failed)
	}
}
