package pubsub

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"cloud.google.com/go/iam/apiv1/iampb"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"

	"github.com/outboxgo/outbox/publishers"
)

var _ publishers.Checker = (*Publisher)(nil)

// checkTopic is the outbox topic Check probes when CheckTopics is empty
// (TopicPrefix+it need not exist).
const checkTopic = "outbox-check"

// permPublish is the permission publishing to a topic takes.
const permPublish = "pubsub.topics.publish"

// Check verifies that Pub/Sub accepts the configuration. For each topic of
// PublisherConfig.CheckTopics it asks Pub/Sub which of the publish
// permission the credentials hold on TopicPrefix+topic (TestIamPermissions,
// which any principal may call; the emulator, which has no IAM, is asked
// for the topic instead): a missing topic, refused credentials or a
// missing permission is an error classified publishers.Misconfigured.
// Without CheckTopics it probes the topic TopicPrefix+"outbox-check" the
// same way, proving the credentials and access to the project; a missing
// probe topic is then no error.
//
// An unreachable Pub/Sub is an error classified publishers.Unavailable.
func (p *Publisher) Check(ctx context.Context) error {
	p.mu.RLock()
	closed := p.closed
	p.mu.RUnlock()
	if closed {
		return publishers.Unavailable(fmt.Errorf("pubsub publisher: check: %w", ErrClosed))
	}
	topics, probe := p.cfg.CheckTopics, false
	if len(topics) == 0 {
		topics, probe = []string{checkTopic}, true
	}
	for _, t := range topics {
		name := fmt.Sprintf("projects/%s/topics/%s", p.cfg.Project, p.TopicID(t))
		err := p.checkTopic(ctx, name)
		if err == nil || (probe && code(err) == codes.NotFound) {
			continue
		}
		if code(err) == codes.NotFound {
			err = fmt.Errorf("%w (create it, or fix the project or topic_prefix)", err)
		}
		return classify(fmt.Errorf("pubsub publisher: check topic %s: %w", name, err))
	}
	return nil
}

// checkTopic asks whether the credentials may publish to the topic name.
func (p *Publisher) checkTopic(ctx context.Context, name string) error {
	resp, err := p.client.TopicAdminClient.TestIamPermissions(ctx,
		&iampb.TestIamPermissionsRequest{Resource: name, Permissions: []string{permPublish}})
	switch {
	case code(err) == codes.Unimplemented: // the emulator
		_, err = p.client.TopicAdminClient.GetTopic(ctx, &pb.GetTopicRequest{Topic: name})
		return err
	case err != nil:
		return err
	case !slices.Contains(resp.GetPermissions(), permPublish):
		return misconfigured(errors.New("the credentials lack the permission " + permPublish))
	}
	return nil
}

// misconfigured marks err as a refused configuration.
func misconfigured(err error) error { return publishers.Misconfigured(err) }
