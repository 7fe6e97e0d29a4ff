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
// record every time, Misconfigured when it refuses the client's
// credentials or permissions, Unavailable when the brokers (or the way to
// them) are down, unmarked otherwise (retry the message, count the
// attempt). The text of the result has the secrets of any URL hidden.
func classify(err error) error {
	if err == nil {
		return nil
	}
	err = redacted{err}
	if refusal(err) {
		return publishers.Misconfigured(err)
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

// refusal reports whether err says the brokers refuse the client's
// configuration: its SASL credentials or mechanism, or an ACL (on the
// topic, the cluster — idempotent writes —, a group or a transactional
// ID).
func refusal(err error) bool {
	for _, k := range []*kerr.Error{
		kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed, kerr.DelegationTokenAuthorizationFailed,
	} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// redacted hides the secrets of any URL in an error's text and unwraps to
// the error, so errors.Is and the classification still see it.
type redacted struct{ err error }

func (e redacted) Error() string { return redact.Text(e.err.Error()) }
func (e redacted) Unwrap() error { return e.err }

// redactText hides the passwords of any URL in s.
func redactText(s string) string { return redact.Text(s) }
