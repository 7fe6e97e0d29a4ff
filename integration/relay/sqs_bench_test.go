package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/sqsfake"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
	sqspub "github.com/outboxgo/outbox/sqs"
)

// awsBenchCreds are the benchmarks' static credentials (the SQS fake and
// goaws check none).
var awsBenchCreds = credentials.NewStaticCredentialsProvider("bench", "bench-secret", "")

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
	for _, mode := range []string{"standard-unordered", "fifo-ordered"} {
		b.Run(mode, func(b *testing.B) {
			fifo := mode == "fifo-ordered"
			url, fake := startSQSFake(b)
			prefix := fmt.Sprintf("bench%d-", time.Now().UnixNano())
			name := prefix + "bench"
			if fifo {
				name += ".fifo"
			}
			fake.CreateQueue(name)
			benchDrain(b, 1, 0, func(b *testing.B, _ *bundle) publishers.Publisher {
				p, err := sqspub.NewPublisher(context.Background(), &sqspub.PublisherConfig{Region: "us-east-1", Endpoint: url,
					Credentials: awsBenchCreds, QueuePrefix: prefix, FIFO: fifo})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = p.Close() })
				return p
			}, &relay.Config{Unordered: !fifo})
		})
	}
	b.Run("raw client", func(b *testing.B) {
		url, fake := startSQSFake(b)
		queueURL := url + fake.CreateQueue(fmt.Sprintf("raw%d-bench", time.Now().UnixNano()))
		tr := &http.Transport{MaxIdleConnsPerHost: sqspub.DefaultMaxInFlight}
		b.Cleanup(tr.CloseIdleConnections)
		c := awssqs.New(awssqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: awsBenchCreds,
			HTTPClient: &http.Client{Transport: tr}})
		body := fmt.Sprintf("%0200d", 0) // 200 bytes, as the drains' payloads
		b.ResetTimer()
		start := time.Now()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			fail error
		)
		sem := make(chan struct{}, sqspub.DefaultMaxInFlight)
		for done := 0; done < b.N; done += 10 {
			n := min(10, b.N-done)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				entries := make([]types.SendMessageBatchRequestEntry, n)
				for i := range entries {
					entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body),
						MessageAttributes: map[string]types.MessageAttributeValue{
							"outbox-id": {DataType: aws.String("String"), StringValue: aws.String(outbox.NewID().String())}}}
				}
				out, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("SendMessageBatch: %d failed entries, the first: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					mu.Lock()
					fail = err
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if fail != nil {
			b.Fatal(fail)
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
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
