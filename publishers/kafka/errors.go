package kafka

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// classify marks err for the relay: Permanent when Kafka will refuse the
// record every time, Unavailable when the brokers (or the way to them) are
// down, unmarked otherwise (retry the message, count the attempt).
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, kerr.MessageTooLarge),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord),
		errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.InvalidTopicException):
		return publishers.Permanent(err)
	case errors.Is(err, ErrClosed),
		errors.Is(err, kgo.ErrClientClosed),
		errors.Is(err, kgo.ErrRecordTimeout),
		errors.Is(err, kgo.ErrRecordRetries),
		errors.Is(err, kgo.ErrMaxBuffered),
		errors.Is(err, kerr.UnknownTopicOrPartition),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return publishers.Unavailable(err)
	}
	var first *kgo.ErrFirstReadEOF
	if errors.As(err, &first) {
		return publishers.Unavailable(err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return publishers.Unavailable(err)
	}
	var ke *kerr.Error
	if errors.As(err, &ke) && ke.Retriable {
		return publishers.Unavailable(err)
	}
	return err
}

// redactText hides the passwords of any URL in s.
func redactText(s string) string { return redact.Text(s) }
