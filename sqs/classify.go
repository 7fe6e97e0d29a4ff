package sqs

import (
	"context"
	"errors"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	smithy "github.com/aws/smithy-go"

	"github.com/outboxgo/outbox/publishers"
)

// misconfiguredCodes are the error codes by which SQS (or AWS's
// authentication in front of it) refuses the configuration: the
// credentials, their permissions, the queue, its KMS key. Both the JSON
// protocol's codes (QueueDoesNotExist) and the query protocol's, which
// SQS sends in x-amzn-query-error and the SDK reports
// (AWS.SimpleQueueService.NonExistentQueue), are listed.
var misconfiguredCodes = []string{
	"AccessDenied", "AccessDeniedException",
	"InvalidClientTokenId", "UnrecognizedClientException",
	"SignatureDoesNotMatch", "IncompleteSignature", "MissingAuthenticationToken",
	"InvalidSecurity", "ExpiredToken", "ExpiredTokenException", "RequestExpired", "AuthFailure",
	"OptInRequired", "InvalidAddress",
	"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
	"KmsAccessDenied", "KMS.AccessDeniedException", "KmsDisabled", "KMS.DisabledException",
	"KmsNotFound", "KMS.NotFoundException", "KmsInvalidState", "KMS.KMSInvalidStateException",
	"KmsInvalidKeyUsage", "KMS.InvalidKeyUsageException",
}

// unavailableCodes say SQS cannot take the call now.
var unavailableCodes = []string{
	"RequestThrottled", "ThrottlingException", "Throttling", "KmsThrottled", "KMS.ThrottlingException",
	"ServiceUnavailable", "InternalError", "InternalFailure", "RequestTimeout", "KmsOptInRequired",
}

// codeOf returns the error code of an API error, "" for any other error.
func codeOf(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// classifyCode classifies an error code and fault as Publish does: see
// classify.
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

// classify marks an error of an SDK call for the relay:
// publishers.Misconfigured when SQS refuses the credentials, their
// permissions or the queue (misconfiguredCodes), publishers.Unavailable
// when it cannot be reached (network errors, a context that ended, the
// SDK's retry quota) or cannot take the call now (throttling, a 5xx),
// unmarked (retryable) for any other error of SQS. A whole call's error is
// never Permanent: it may come of one entry of a batch. nil stays nil.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return publishers.Unavailable(err)
	}
	var nq *types.QueueDoesNotExist
	if errors.As(err, &nq) {
		return publishers.Misconfigured(err)
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// No answer of SQS: the network, the SDK's retry quota, a
		// response the SDK could not read.
		return publishers.Unavailable(err)
	}
	if ae.ErrorFault() == smithy.FaultServer {
		return publishers.Unavailable(err)
	}
	return classifyCode(ae.ErrorCode(), false, err)
}

// entryError classifies the error of one entry of a batch (a Failed
// entry): the refusal codes as classify does (Misconfigured), otherwise
// SenderFault means SQS will refuse the message every time (Permanent) and
// no SenderFault that it may take it later (retryable, unmarked: one
// entry's failure is no outage).
func entryError(code string, senderFault bool, err error) error {
	switch {
	case slices.Contains(misconfiguredCodes, code):
		return publishers.Misconfigured(err)
	case senderFault:
		return publishers.Permanent(err)
	}
	return err
}
