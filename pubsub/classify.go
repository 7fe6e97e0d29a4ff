package pubsub

import (
	"context"
	"errors"
	"io"
	"net"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/outboxgo/outbox/publishers"
)

// classify marks an error of the Pub/Sub client for the relay:
// publishers.Misconfigured when Pub/Sub refuses the configuration (a
// missing topic or project, refused credentials or permission),
// publishers.Unavailable when it cannot be reached or cannot take the
// message now, publishers.Permanent when it refused this one message as
// invalid (InvalidArgument; see Publish for a batch), unmarked otherwise;
// nil stays nil.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch code(err) {
	case codes.NotFound, codes.PermissionDenied, codes.Unauthenticated:
		return publishers.Misconfigured(err)
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted,
		codes.Aborted, codes.Internal, codes.Unknown:
		return publishers.Unavailable(err)
	case codes.InvalidArgument:
		return publishers.Permanent(err)
	case codes.OK:
	default:
		return err
	}
	switch {
	case errors.Is(err, ErrClosed),
		errors.Is(err, gpubsub.ErrPublisherStopped),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return publishers.Unavailable(err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return publishers.Unavailable(err)
	}
	return err
}

// code is err's gRPC status code, codes.OK when it carries none.
func code(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if s := se.GRPCStatus(); s != nil {
			return s.Code()
		}
	}
	return codes.OK
}
