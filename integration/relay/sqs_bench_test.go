package relay_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/publishers"
	sqspub "github.com/outboxgo/outbox/sqs"
)

// BenchmarkDrainSQS drains a backlog of b.N events from PostgreSQL to SQS,
// on the project's own SQS-compatible test server (internal/testkit/sqsfake:
// AWS JSON 1.0 in process, no SQS emulator): a standard queue unordered
// and a FIFO queue ordered (1,000 keys: 1,000 message groups, the event ID
// as deduplication ID), beside the SDK's own SendMessageBatch of 10
// entries, sqs.DefaultMaxInFlight calls at once, in the same run. The fake
// answers from memory on this machine: the figures measure the relay and
// the client's cost (claim, encoding, SDK, HTTP, mark), not SQS, whose
// tens of milliseconds per call bound a real queue's rate.
//
//	go test -run '^$' -bench DrainSQS -benchtime 20000x ./relay/
func BenchmarkDrainSQS(b *testing.B) {
	benchAWSDrains(b, func(b *testing.B, prefix, name string, fifo bool) publishers.Publisher {
		url, fake := startSQSFake(b)
		fake.CreateQueue(name)
		p, err := sqspub.NewPublisher(context.Background(), &sqspub.PublisherConfig{Region: "us-east-1", Endpoint: url,
			Credentials: awsBenchCreds, QueuePrefix: prefix, FIFO: fifo})
		return benchPublisher(b, p, err)
	})
	b.Run("raw client", func(b *testing.B) {
		url, fake := startSQSFake(b)
		queueURL := url + fake.CreateQueue(fmt.Sprintf("raw%d-bench", time.Now().UnixNano()))
		c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: awsBenchCreds,
			HTTPClient: awsBenchHTTP(b, sqspub.DefaultMaxInFlight)})
		benchRawBatches(b, sqspub.DefaultMaxInFlight, func(ctx context.Context, n int) error {
			entries := rawEntries(n, func(id, eventID *string) types.SendMessageBatchRequestEntry {
				return types.SendMessageBatchRequestEntry{Id: id, MessageBody: aws.String(rawBody),
					MessageAttributes: map[string]types.MessageAttributeValue{"outbox-id": {DataType: aws.String("String"), StringValue: eventID}}}
			})
			out, err := c.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			if err != nil {
				return err
			}
			return failedEntries("SendMessageBatch", out.Failed, func(f types.BatchResultErrorEntry) *string { return f.Message })
		})
	})
}

// startSQSFake serves a fresh SQS fake on a port of 127.0.0.1 until
// cleanup and returns its URL.
func startSQSFake(b *testing.B) (string, *sqsfake.Server) {
	f := sqsfake.New(sqsfake.Options{})
	hs := httptest.NewServer(f)
	b.Cleanup(hs.Close)
	return hs.URL, f
}
