package sns

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// Check verifies that SNS accepts the configuration. With
// PublisherConfig.CheckTopics it looks each topic up with
// GetTopicAttributes: that proves the credentials, the permission
// sns:GetTopicAttributes on it, and that it exists. Without, it calls
// ListTopics (one page): that proves the credentials are valid and hold
// sns:ListTopics, not that any topic exists nor that Publish is allowed —
// those fail the first publish, as Misconfigured.
//
// It returns an error classified publishers.Misconfigured when SNS refuses
// the credentials, a permission (AuthorizationError) or a topic
// (NotFound), publishers.Unavailable when it cannot be reached.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("sns publisher: check: %w", ErrClosed))
	}
	if len(p.cfg.CheckTopics) == 0 {
		if _, err := p.client.ListTopics(ctx, &sns.ListTopicsInput{}); err != nil {
			return classify(fmt.Errorf("sns publisher: check: ListTopics: %w", err))
		}
		return nil
	}
	for _, t := range p.cfg.CheckTopics {
		name := p.cfg.topicName(t)
		if !validTopicName(name) {
			return publishers.Misconfigured(fmt.Errorf("sns publisher: check: topic %q: SNS topic %q: %w", t, name, ErrBadTopicName))
		}
		arn := p.cfg.arn(name)
		if _, err := p.client.GetTopicAttributes(ctx, &sns.GetTopicAttributesInput{TopicArn: aws.String(arn)}); err != nil {
			return classify(fmt.Errorf("sns publisher: check: topic %q: GetTopicAttributes %s: %w", t, arn, err))
		}
	}
	return nil
}
