package sqs

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/outboxgo/outbox/publishers"
)

func TestClassify(t *testing.T) {
	api := func(code string, fault smithy.ErrorFault) error {
		return &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault}
	}
	for _, c := range []struct {
		name string
		err  error
		want error // nil: retryable, unmarked
	}{
		{"refused key", api("InvalidClientTokenId", smithy.FaultClient), publishers.ErrMisconfigured},
		{"JSON protocol's refusal", api("UnrecognizedClientException", smithy.FaultClient), publishers.ErrMisconfigured},
		{"access denied", api("AccessDenied", smithy.FaultClient), publishers.ErrMisconfigured},
		{"no queue, query code", api("AWS.SimpleQueueService.NonExistentQueue", smithy.FaultClient), publishers.ErrMisconfigured},
		{"no queue, typed", &types.QueueDoesNotExist{}, publishers.ErrMisconfigured},
		{"throttled", api("RequestThrottled", smithy.FaultClient), publishers.ErrUnavailable},
		{"server fault", api("Whatever", smithy.FaultServer), publishers.ErrUnavailable},
		{"network", &net.OpError{Op: "dial", Err: errors.New("refused")}, publishers.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, publishers.ErrUnavailable},
		{"other client error", api("InvalidParameterValue", smithy.FaultClient), nil},
	} {
		got := classify(c.err)
		for _, k := range []error{publishers.ErrMisconfigured, publishers.ErrUnavailable, publishers.ErrPermanent} {
			if errors.Is(got, k) != errors.Is(c.want, k) {
				t.Errorf("%s: classify = %v: Is(%v) = %v", c.name, got, k, errors.Is(got, k))
			}
		}
	}
	if err := entryError("InvalidParameterValue", true, errors.New("x")); !publishers.IsPermanent(err) {
		t.Errorf("sender fault entry: %v, want Permanent", err)
	}
	if err := entryError("InternalError", false, errors.New("x")); publishers.IsPermanent(err) || publishers.IsMisconfigured(err) {
		t.Errorf("entry without sender fault: %v, want retryable", err)
	}
	if err := entryError("AccessDenied", true, errors.New("x")); !publishers.IsMisconfigured(err) {
		t.Errorf("AccessDenied entry: %v, want Misconfigured", err)
	}
}
