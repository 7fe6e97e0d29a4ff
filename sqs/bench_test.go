package sqs_test

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/sqs"
)

// benchBatch is how many messages one Publish call (or one round of the
// raw loop) sends.
const benchBatch = 1000

// BenchmarkPublish compares, on the in-process fake and in the same run,
// the publisher (batches of 1,000 messages of 200 bytes, as a relay
// sends them: SendMessageBatch of 10, MaxInFlight calls at once) with a
// raw loop of SendMessageBatch calls of 10 entries, DefaultMaxInFlight at
// once, carrying the same bodies and attributes (encoded by the package). Both report messages per
// second. The fake answers from memory on the same machine: the numbers
// measure the publisher's own cost (encoding, SDK, HTTP), not SQS, whose
// latency per call (tens of ms) bounds a real queue's rate.
func BenchmarkPublish(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 200)
	b.Run("Publisher", func(b *testing.B) {
		f := startFake(b)
		prefix := newPrefix()
		f.CreateQueue(prefix + "bench")
		pub, err := sqs.NewPublisher(context.Background(), &sqs.PublisherConfig{Region: "us-east-1", Endpoint: f.URL,
			Credentials: creds, QueuePrefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = pub.Close() })
		msgs := make([]outbox.Message, benchBatch)
		start, n := time.Now(), 0
		for b.Loop() {
			for i := range msgs {
				msgs[i] = outbox.Message{ID: outbox.NewID(), Topic: "bench", Payload: payload, CreatedAt: start,
					Headers: benchHeaders}
			}
			for i, err := range pub.Publish(context.Background(), msgs) {
				if err != nil {
					b.Fatalf("message %d: %v", i, err)
				}
			}
			n += benchBatch
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
	})
	b.Run("RawSendMessageBatch", func(b *testing.B) {
		f := startFake(b)
		queueURL := f.URL + f.CreateQueue(newPrefix()+"bench")
		c := client(b, f.URL, creds)
		start, n := time.Now(), 0
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make(chan error, benchBatch/10)
			sem := make(chan struct{}, sqs.DefaultMaxInFlight)
			for range benchBatch / 10 {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					entries := make([]types.SendMessageBatchRequestEntry, 10)
					for i := range entries {
						m := outbox.Message{ID: outbox.NewID(), Topic: "bench", Payload: payload, CreatedAt: start, Headers: benchHeaders}
						body, attrs, _ := sqs.EncodeForTest(&m)
						entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body), MessageAttributes: attrs}
					}
					out, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
					if err == nil && len(out.Failed) > 0 {
						err = errFailedEntries
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			n += benchBatch
		}
		b.ReportMetric(float64(n)/time.Since(start).Seconds(), "msgs/s")
	})
}

var benchHeaders = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}

var errFailedEntries = errorString("SendMessageBatch: failed entries")

type errorString string

func (e errorString) Error() string { return string(e) }
