package nats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/internal/redact"
	"github.com/outboxgo/outbox/publishers"
)

// ErrClosed is returned (as unavailable) for messages published after
// Close.
var ErrClosed = errors.New("nats publisher closed")

// ErrNoStream is the cause of a publish to a subject no JetStream stream
// captures (the server answered "no responders"). It is left unmarked:
// the relay retries the message, and counts the attempt, until someone
// creates the stream.
var ErrNoStream = errors.New("no JetStream stream captures subject")

// JetStream API error codes the classification tells apart.
const (
	codeClusterNotAvailable   = 10008
	codeInsufficientResources = 10023
	codeNotEnabledForAccount  = 10039
	codeSubjectsOverlap       = 10065
)

// classify marks err for the relay: Permanent when the broker will refuse
// the message every time, Misconfigured when it refuses the publisher's
// credentials or account, Unavailable when the broker (or the way to it) is
// down, unmarked otherwise (retry the message, count the attempt). The
// text of the result has the secrets of any URL in it hidden.
func classify(err error) error {
	if err == nil {
		return nil
	}
	err = redacted(err)
	switch {
	case errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, nats.ErrBadHeaderMsg),
		errors.Is(err, errBadHeader),
		errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		return publishers.Permanent(err)
	case refusal(err):
		return publishers.Misconfigured(err)
	case errors.Is(err, ErrClosed),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrHeadersNotSupported),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		errors.Is(err, jetstream.ErrJetStreamPublisherClosed),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.ErrClosedPipe),
		errors.Is(err, net.ErrClosed):
		return publishers.Unavailable(err)
	}
	// The socket failed under a write (broken pipe, connection reset).
	var netErr net.Error
	if errors.As(err, &netErr) {
		return publishers.Unavailable(err)
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case codeClusterNotAvailable, codeInsufficientResources:
			return publishers.Unavailable(err)
		}
	}
	return err
}

// authRefusal reports whether err says the server refused the
// credentials (nats.go keeps such an error as the connection's last).
func authRefusal(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// refusal reports whether err says the server refuses the configuration:
// the credentials (authorization violation, expired or revoked), a
// permission, the account (no JetStream there), or the TLS requirements.
func refusal(err error) bool {
	switch {
	case errors.Is(err, nats.ErrAuthorization),
		errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked),
		errors.Is(err, nats.ErrAccountAuthExpired),
		errors.Is(err, nats.ErrPermissionViolation),
		errors.Is(err, nats.ErrSecureConnRequired),
		errors.Is(err, nats.ErrSecureConnWanted),
		errors.Is(err, nats.ErrNkeysNotSupported),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == codeNotEnabledForAccount
}

// redactedError hides the secrets of any URL in an error's text (nats.go
// names the server in some of its errors) and unwraps to the error, so
// that errors.Is and the classification still see it.
type redactedError struct{ err error }

func (e redactedError) Error() string { return redact.Text(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// redacted wraps err in a redactedError, once.
func redacted(err error) error {
	var r redactedError
	if err == nil || errors.As(err, &r) {
		return err
	}
	return redactedError{err}
}

// connError describes the error of connecting to urls, classified.
func connError(urls string, err error) error {
	return classify(fmt.Errorf("nats publisher: connect to %s: %w", redact.URL(urls), err))
}
