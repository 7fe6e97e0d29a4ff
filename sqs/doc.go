// Package sqs is the Amazon SQS backend, built on aws-sdk-go-v2: a
// Publisher that sends outbox messages to SQS queues, for the relay, and
// a Subscriber that feeds an inbox.Inbox from a queue. docs/aws.md has the
// whole story; this is the reference.
//
//	// The relay's side: topic T goes to the queue "orders-"+T.
//	pub, err := sqs.NewPublisher(ctx, &sqs.PublisherConfig{
//		Region: "eu-west-1", QueuePrefix: "orders-",
//	})
//
//	// The consumer's side: the queue's messages, through the inbox.
//	sub, err := sqs.NewSubscriber(client, in, handler, &sqs.SubscriberConfig{
//		Queue: "orders-placed", QueuePrefix: "orders-", DeadLetterQueue: "billing-dead",
//	})
//	err = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// Importing the package registers the scheme sqs:// with package backend.
//
// # URLs
//
//	sqs://REGION/QUEUE_PREFIX?PARAMS
//	sqs://ACCOUNT.REGION/QUEUE_PREFIX?PARAMS
//
// REGION is the queues' region, ACCOUNT (12 digits) the account owning
// them when it is not the credentials' own. The path is the queue prefix.
// The URL holds no credentials (one with user-info is refused): they come
// from the SDK's default chain — AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), AWS_PROFILE and the shared
// files, SSO, web identity, the container's or the instance's role — and
// are never logged. Parameters (any other is refused by name):
//
//   - endpoint: an SQS endpoint URL instead of AWS's (LocalStack, a test
//     server);
//   - fifo (false): append .fifo to every queue name that lacks it;
//   - max_size (262144): the largest message, body and attributes;
//   - max_in_flight (16): SendMessageBatch calls in flight at once;
//   - max_attempts (3): the SDK's attempts per call;
//   - check_topics: topics whose queues Check resolves.
//
// # Queues
//
// Topic T goes to the queue PublisherConfig.Queue(T) when set, else
// QueuePrefix+T, with ".fifo" appended when FIFO is set and the name lacks
// it. A queue is FIFO when its name ends in .fifo, and only then. The
// publisher creates no queue: a missing queue fails its messages as
// Misconfigured; a topic whose queue name SQS cannot allow (other than
// letters, digits, - and _, over 80 characters) fails as Permanent. The
// first message to a queue looks its URL up with GetQueueUrl; the URL is
// remembered.
//
// # Mapping
//
// The payload is the body when it is text SQS takes; otherwise the body is
// its base64 and AttrBodyEncoding says "base64" (an empty payload: body
// BodyEmpty, encoding "empty"). Message attributes, at most 10 (SQS's
// limit): AttrID (the event ID), AttrKey, AttrType (String, or Binary for
// a value with characters SQS refuses in a string), AttrCreatedAt, and
// AttrBodyEncoding when needed; then the headers, by name in byte order,
// each an attribute of its own (String or Binary) while they fit; the rest
// — and headers whose name is no valid attribute name, or whose value is
// empty — go in AttrHeaders as one JSON object, which takes one of the
// ten. Decode reads all of it back.
//
// On a FIFO queue MessageGroupId is GroupID(Key) — the key itself when it
// is 1 to 128 characters of ASCII letters, digits and punctuation, else
// "sha256-" and its hex SHA-256 — and, for an unkeyed event, GroupID of
// its topic; MessageDeduplicationId is the event ID, so SQS drops a
// re-send within its 5-minute window (and Publish reports it published).
//
// # Publishing and ordering
//
// Publish sends SendMessageBatch calls of up to 10 entries and max_size
// bytes, up to max_in_flight at once over all calls. A key's messages (per
// queue) take one lane, sent in order, one batch after another; once one
// fails, the key's later batches in the call are not sent (its messages in
// the same batch, which SQS takes one by one, may be stored). A standard
// queue does not keep any order on delivery (best effort); a FIFO queue
// delivers each group — each key — in order.
//
// Errors: a message over max_size, or with a topic no queue can have, is
// Permanent, unsent. A Failed entry with SenderFault is Permanent, one
// without is retryable, and the refusal codes (below) are Misconfigured.
// A whole call's error: InvalidClientTokenId, UnrecognizedClientException,
// SignatureDoesNotMatch, ExpiredToken, AccessDenied, QueueDoesNotExist
// (AWS.SimpleQueueService.NonExistentQueue) and the KMS refusals are
// Misconfigured; throttling, 5xx, network errors, a context that ended and
// the SDK's retry quota are Unavailable; any other is retryable. Check
// resolves the check_topics' queues (GetQueueUrl) or, without them, calls
// ListQueues (prefix, MaxResults 1), which proves the credentials and
// sqs:ListQueues only.
//
// # Subscribing
//
// The Subscriber long-polls (WaitTime, 20 s) for as many messages as it
// has free handlers (at most 10 a call), with VisibilityTimeout; while a
// handler runs it extends the message's visibility every third of it. It
// deletes a message only after the inbox committed (or found a
// duplicate). A failed handler's message gets its visibility set to the
// backoff, rounded up to whole seconds, and comes back then. The delivery
// count is ApproximateReceiveCount; after MaxDeliveries, on a permanent
// error or an undecodable message, it sends the message to
// DeadLetterQueue (body and identifying attributes as they were, every
// header in AttrHeaders, and AttrError, AttrDeadSource,
// AttrDeadDeliveries), then deletes it. On a FIFO queue a group's messages
// of one receive are handled in order, one at a time; once one is not
// acknowledged, the rest are made visible again unhandled. Stop interrupts
// the long poll; a hard Stop makes the cut-short messages visible at once
// (their receive count stays counted).
//
// # Limits
//
// SQS's: 10 entries per batch, 256 KiB per message and per batch (1 MiB
// where the queue allows it since 2025: raise max_size), 10 message
// attributes, group and deduplication IDs of 128 characters, visibility of
// 12 hours, a long poll of 20 s, a 5-minute deduplication window.
package sqs
