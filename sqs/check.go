package sqs

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// Check verifies that SQS accepts the configuration. With
// PublisherConfig.CheckTopics it resolves each topic's queue with
// GetQueueUrl (in PublisherConfig.Account when set): that proves the
// credentials, the permission sqs:GetQueueUrl on each queue, and that the
// queues exist. Without, the topics' queues are not known in advance, and
// it calls ListQueues with the queue prefix and MaxResults 1: that proves
// the credentials are valid (signed and accepted by AWS) and hold
// sqs:ListQueues, not that any queue exists nor that SendMessage is
// allowed — a missing queue or a refused send fails the first publish, as
// Misconfigured.
//
// It returns an error classified publishers.Misconfigured when SQS refuses
// the credentials (InvalidClientTokenId, UnrecognizedClientException,
// SignatureDoesNotMatch, ExpiredToken…), the permission (AccessDenied) or
// a queue (QueueDoesNotExist), and publishers.Unavailable when it cannot be
// reached.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("sqs publisher: check: %w", ErrClosed))
	}
	if len(p.cfg.CheckTopics) == 0 {
		_, err := p.client.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(p.cfg.QueuePrefix), MaxResults: aws.Int32(1)})
		if err != nil {
			return classify(fmt.Errorf("sqs publisher: check: ListQueues %q: %w", p.cfg.QueuePrefix, err))
		}
		return nil
	}
	for _, t := range p.cfg.CheckTopics {
		name := p.cfg.queueName(t)
		if !validQueueName(name) {
			return publishers.Misconfigured(fmt.Errorf("sqs publisher: check: topic %q: queue %q: %w", t, name, ErrBadQueueName))
		}
		if _, err := p.queueURL(ctx, name); err != nil {
			return fmt.Errorf("sqs publisher: check: topic %q: %w", t, err)
		}
	}
	return nil
}
