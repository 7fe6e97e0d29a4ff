package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/publishers"
	"github.com/outboxgo/outbox/relay"
)

// awsBenchKey is the access key of the AWS benchmarks' static credentials
// (the SQS fake checks none, the goaws shim this one).
const awsBenchKey = "bench"

// awsBenchCreds are the AWS benchmarks' static credentials.
var awsBenchCreds = credentials.NewStaticCredentialsProvider(awsBenchKey, "bench-secret", "")

// rawBody is the raw clients' message body: 200 bytes, as the drains'
// payloads.
var rawBody = fmt.Sprintf("%0200d", 0)

// benchAWSDrains runs the drain benchmarks of an AWS publisher: a standard
// queue or topic unordered, and a FIFO one ordered (benchDrain's 1,000
// keys). newPub makes the publisher, with the prefix prefix, to the fresh
// queue or topic name (prefix + "bench", ".fifo" at the end if fifo) that it
// creates.
func benchAWSDrains(b *testing.B, newPub func(b *testing.B, prefix, name string, fifo bool) publishers.Publisher) {
	for _, mode := range []string{"standard-unordered", "fifo-ordered"} {
		b.Run(mode, func(b *testing.B) {
			fifo := mode == "fifo-ordered"
			prefix := fmt.Sprintf("bench%d-", time.Now().UnixNano())
			name := prefix + "bench"
			if fifo {
				name += ".fifo"
			}
			benchDrain(b, 1, 0, func(b *testing.B, _ *bundle) publishers.Publisher { return newPub(b, prefix, name, fifo) },
				&relay.Config{Unordered: !fifo})
		})
	}
}

// benchPublisher fails the benchmark on err, else closes p at cleanup and
// returns it.
func benchPublisher(b *testing.B, p publishers.Publisher, err error) publishers.Publisher {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// awsBenchHTTP is an HTTP client for a raw AWS client that keeps
// inFlight connections to the test server, closed at cleanup.
func awsBenchHTTP(b *testing.B, inFlight int) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: inFlight}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// benchRawBatches times b.N events sent by a raw client in batches of 10
// (AWS's batch limit), inFlight calls at once: send sends one batch of n.
// It fails the benchmark with the last error and reports events/s.
func benchRawBatches(b *testing.B, inFlight int, send func(ctx context.Context, n int) error) {
	b.ResetTimer()
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail error
	)
	sem := make(chan struct{}, inFlight)
	for done := 0; done < b.N; done += 10 {
		n := min(10, b.N-done)
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := send(context.Background(), n); err != nil {
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
}

// rawEntries makes a raw client's batch of n entries: entry makes one from
// its ID in the batch and a fresh event ID (the outbox-id attribute).
func rawEntries[E any](n int, entry func(id, eventID *string) E) []E {
	entries := make([]E, n)
	for i := range entries {
		entries[i] = entry(aws.String(strconv.Itoa(i)), aws.String(outbox.NewID().String()))
	}
	return entries
}

// failedEntries is the error of a batch call whose answer lists failed
// entries (message reads an entry's message), nil if none failed.
func failedEntries[F any](call string, failed []F, message func(F) *string) error {
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d failed entries, the first: %s", call, len(failed), aws.ToString(message(failed[0])))
}
