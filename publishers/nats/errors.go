package nats

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxgo/outbox/publishers"
)

// ErrClosed is returned (as unavailable) for messages published after
// Close.
var ErrClosed = errors.New("nats publisher closed")

// JetStream API error codes the classification tells apart.
const (
	codeClusterNotAvailable   = 10008
	codeInsufficientResources = 10023
)

// classify marks err for the relay: Permanent when the broker will refuse
// the message every time, Unavailable when the broker (or the way to it) is
// down, unmarked otherwise (retry the message, count the attempt).
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, nats.ErrMaxPayload),
		errors.Is(err, nats.ErrBadSubject),
		errors.Is(err, errBadHeader),
		errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum):
		return publishers.Permanent(err)
	case errors.Is(err, ErrClosed),
		errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrHeadersNotSupported),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout),
		errors.Is(err, jetstream.ErrTooManyStalledMsgs),
		errors.Is(err, jetstream.ErrJetStreamPublisherClosed),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
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
