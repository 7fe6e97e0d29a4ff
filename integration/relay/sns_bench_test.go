package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssns "github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/outboxgo/outbox/internal/testkit/goawstest"
	"github.com/outboxgo/outbox/publishers"
	snspub "github.com/outboxgo/outbox/sns"
)

// BenchmarkDrainSNS drains a backlog of b.N events from PostgreSQL to SNS,
// on goaws in process (internal/testkit/goawstest: the query protocol,
// PublishBatch answered by the shim one entry at a time, one call at a
// time into goaws): a standard topic unordered and a topic named .fifo
// ordered (1,000 keys: 1,000 message groups, the event ID as deduplication
// ID), beside the SDK's own PublishBatch of 10 entries,
// sns.DefaultMaxInFlight calls at once, in the same run. goaws has no FIFO
// topics: the .fifo topic is a standard one that ignores the groups and
// deduplication IDs, so the ordered figure measures the relay's ordered
// mode and the publisher's FIFO path (one batch per key at a time), not
// FIFO delivery. The topics have no subscribers, and goaws answers from
// memory on this machine: the figures measure the relay and the client's
// cost (claim, encoding, SDK, HTTP, mark), not SNS.
//
//	go test -run '^$' -bench DrainSNS -benchtime 20000x ./relay/
func BenchmarkDrainSNS(b *testing.B) {
	benchAWSDrains(b, func(b *testing.B, prefix, name string, fifo bool) publishers.Publisher {
		g := goawstest.Start(b, awsBenchKey)
		goawstest.CreateTopic(b, name)
		p, err := snspub.NewPublisher(context.Background(), &snspub.PublisherConfig{Region: "us-east-1", Account: goawstest.Account,
			Endpoint: g.URL, Credentials: awsBenchCreds, TopicPrefix: prefix, FIFO: fifo})
		return benchPublisher(b, p, err)
	})
	b.Run("raw client", func(b *testing.B) {
		g := goawstest.Start(b, awsBenchKey)
		topic := fmt.Sprintf("raw%d-bench", time.Now().UnixNano())
		goawstest.CreateTopic(b, topic)
		arn := "arn:aws:sns:us-east-1:" + goawstest.Account + ":" + topic
		c := awssns.New(awssns.Options{Region: "us-east-1", BaseEndpoint: aws.String(g.URL), Credentials: awsBenchCreds,
			HTTPClient: awsBenchHTTP(b, snspub.DefaultMaxInFlight)})
		benchRawBatches(b, snspub.DefaultMaxInFlight, func(ctx context.Context, n int) error {
			entries := rawEntries(n, func(id, eventID *string) snstypes.PublishBatchRequestEntry {
				return snstypes.PublishBatchRequestEntry{Id: id, Message: aws.String(rawBody),
					MessageAttributes: map[string]snstypes.MessageAttributeValue{"outbox-id": {DataType: aws.String("String"), StringValue: eventID}}}
			})
			out, err := c.PublishBatch(ctx, &awssns.PublishBatchInput{TopicArn: aws.String(arn), PublishBatchRequestEntries: entries})
			if err != nil {
				return err
			}
			return failedEntries("PublishBatch", out.Failed, func(f snstypes.BatchResultErrorEntry) *string { return f.Message })
		})
	})
}
