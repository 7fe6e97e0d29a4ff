package pubsub

import (
	"context"
	"errors"
	"fmt"
	"testing"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/outboxgo/outbox/publishers"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{status.Error(codes.NotFound, "Topic not found"), publishers.ErrMisconfigured},
		{status.Error(codes.PermissionDenied, "no"), publishers.ErrMisconfigured},
		{status.Error(codes.Unauthenticated, "no"), publishers.ErrMisconfigured},
		{status.Error(codes.Unavailable, "down"), publishers.ErrUnavailable},
		{status.Error(codes.DeadlineExceeded, "slow"), publishers.ErrUnavailable},
		{status.Error(codes.ResourceExhausted, "quota"), publishers.ErrUnavailable},
		{status.Error(codes.InvalidArgument, "schema"), publishers.ErrPermanent},
		{fmt.Errorf("wrapped: %w", status.Error(codes.InvalidArgument, "schema")), publishers.ErrPermanent},
		{context.DeadlineExceeded, publishers.ErrUnavailable},
		{gpubsub.ErrPublisherStopped, publishers.ErrUnavailable},
		{ErrClosed, publishers.ErrUnavailable},
	} {
		got := classify(tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
	plain := errors.New("something else")
	if got := classify(plain); publishers.IsPermanent(got) || publishers.IsUnavailable(got) || publishers.IsMisconfigured(got) {
		t.Errorf("classify(%v) = %v, want it unclassified", plain, got)
	}
}
