// Package sns is the Amazon SNS backend, built on aws-sdk-go-v2: a
// Publisher that sends outbox messages to SNS topics with PublishBatch, for
// the relay. It has no subscriber of its own: subscribe an SQS queue to
// the topic with raw message delivery and consume it with the sqs
// package's Subscriber, which reads the same attributes. docs/aws.md has
// the whole story.
//
//	// Outbox topic T goes to the SNS topic arn:aws:sns:eu-west-1:123456789012:orders-T.
//	pub, err := sns.NewPublisher(ctx, &sns.PublisherConfig{
//		Region: "eu-west-1", Account: "123456789012", TopicPrefix: "orders-",
//	})
//
// Importing the package registers the scheme sns:// with package backend.
//
// # URLs
//
//	sns://ACCOUNT.REGION/TOPIC_PREFIX?PARAMS
//
// ACCOUNT (12 digits) and REGION make the topics' ARNs,
// arn:PARTITION:sns:REGION:ACCOUNT:NAME (the partition from the region:
// aws, aws-cn, aws-us-gov…). The URL holds no credentials (one with
// user-info is refused): they come from the SDK's default chain and are
// never logged. Parameters (any other is refused by name): endpoint, fifo
// (append .fifo to every topic name), max_size (262144), max_in_flight
// (16), max_attempts (3), check_topics — as the sqs package's.
//
// # Mapping
//
// The same as the sqs package's, duplicated here (message.go) so that
// neither module depends on the other: the payload is the message (base64
// with AttrBodyEncoding "base64" when it is not text SNS takes, BodyEmpty
// with "empty" when empty); at most 10 message attributes — AttrID,
// AttrKey, AttrType, AttrCreatedAt, AttrBodyEncoding, the headers while
// they fit, and the rest in AttrHeaders as one JSON object. A raw delivery
// to SQS carries the attributes over, so sqs.Decode reads the message.
// On a FIFO topic MessageGroupId is GroupID(Key) (of the topic for an
// unkeyed event) and MessageDeduplicationId the event ID.
//
// # Publishing and ordering
//
// Publish sends PublishBatch calls of up to 10 entries and max_size bytes,
// up to max_in_flight at once; a key's messages go in order, one batch
// after another; once one fails, the key's later batches in the call are
// not sent (its messages in the same batch may be accepted). A standard topic does not order; a FIFO topic keeps each
// group's order into FIFO queues. Errors are classified as in the sqs
// package: AuthorizationError, InvalidClientTokenId, NotFound (no such
// topic) and the KMS refusals are Misconfigured; throttling, 5xx and
// network errors Unavailable; a Failed entry with SenderFault Permanent.
// Check looks the check_topics' topics up (GetTopicAttributes) or, without
// them, calls ListTopics, which proves the credentials and sns:ListTopics
// only. The publisher creates no topic.
package sns
