package sns

import (
	"context"
	"errors"
	"slices"

	smithy "github.com/aws/smithy-go"

	"github.com/outboxgo/outbox/publishers"
)

// misconfiguredCodes are the error codes by which SNS (or AWS's
// authentication in front of it) refuses the configuration: the
// credentials, their permissions, the topic, its KMS key.
var misconfiguredCodes = []string{
	"AuthorizationError", "AccessDenied", "AccessDeniedException",
	"InvalidClientTokenId", "UnrecognizedClientException",
	"SignatureDoesNotMatch", "IncompleteSignature", "MissingAuthenticationToken",
	"InvalidSecurity", "ExpiredToken", "ExpiredTokenException", "RequestExpired", "OptInRequired",
	"NotFound", "AWS.SimpleNotificationService.NonExistentTopic",
	"KMSAccessDenied", "KMSDisabled", "KMSNotFound", "KMSInvalidState", "KMSOptInRequired",
}

// unavailableCodes say SNS cannot take the call now.
var unavailableCodes = []string{
	"Throttled", "ThrottlingException", "Throttling", "KMSThrottling",
	"ServiceUnavailable", "InternalError", "InternalFailure", "RequestTimeout",
}

func classifyCode(code string, senderFault bool, err error) error {
	switch {
	case slices.Contains(misconfiguredCodes, code):
		return publishers.Misconfigured(err)
	case slices.Contains(unavailableCodes, code):
		return publishers.Unavailable(err)
	case senderFault:
		return publishers.Permanent(err)
	}
	return err
}

// classify marks an error of an SDK call for the relay, as the sqs
// package does: Misconfigured for a refused credential, permission or
// topic (misconfiguredCodes), Unavailable when SNS cannot be reached or
// cannot take the call now, unmarked (retryable) otherwise; a whole call's
// error is never Permanent.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return publishers.Unavailable(err)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return publishers.Unavailable(err)
	}
	if ae.ErrorFault() == smithy.FaultServer {
		return publishers.Unavailable(err)
	}
	return classifyCode(ae.ErrorCode(), false, err)
}

// entryError classifies a Failed entry of a batch: a refusal code is
// Misconfigured, otherwise SenderFault is Permanent and no SenderFault
// retryable (one entry's failure is no outage).
func entryError(code string, senderFault bool, err error) error {
	switch {
	case slices.Contains(misconfiguredCodes, code):
		return publishers.Misconfigured(err)
	case senderFault:
		return publishers.Permanent(err)
	}
	return err
}
