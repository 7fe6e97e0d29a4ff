// Package pubsub publishes outbox events to Google Cloud Pub/Sub and feeds
// an inbox from a Pub/Sub subscription.
//
// It is a module of its own (github.com/outboxgo/outbox/pubsub), so that
// only the services that use Pub/Sub get Google's client
// (cloud.google.com/go/pubsub/v2) and its dependencies.
//
// # URL
//
// The relay names the broker by a URL; importing the package registers
// the scheme:
//
//	pubsub://PROJECT?topic_prefix=orders-&ordering=true
//
// The host is the Google Cloud project ID. Parameters:
//
//   - topic_prefix (default ""): outbox topic T goes to the Pub/Sub topic
//     topic_prefix+T, which must exist (the publisher creates nothing).
//   - ordering (default true): publish a keyed event with its key as the
//     ordering key (see Ordering).
//   - check_topics (default none): comma-separated outbox topics that
//     Check, at start, proves exist and may be published to.
//   - publish_timeout (default 30s): how long the client keeps trying to
//     send one batch, retries included.
//
// Any other parameter is refused by name. Credentials never go in the
// URL: the client finds them as Google's libraries do (Application
// Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, the gcloud user,
// the metadata server). With PUBSUB_EMULATOR_HOST set (127.0.0.1:8085) the
// client talks to the emulator at that address and needs none.
//
// # Messages
//
// An event becomes a Pub/Sub message whose data is the payload and whose
// attributes are:
//
//   - outbox-id (AttrID): the event ID, a UUID; consumers dedupe by it
//     (Pub/Sub assigns its own message ID, which a re-sent event does not
//     keep).
//   - outbox-topic (AttrTopic): the outbox topic.
//   - outbox-key (AttrKey), outbox-type (AttrType): the key and type,
//     absent when empty.
//   - outbox-created-at (AttrCreatedAt): RFC 3339 with nanoseconds, UTC.
//   - one attribute per header, named and valued as the header is (the
//     outbox reserves the outbox- prefix, so headers never clash with the
//     attributes above).
//
// Decode turns such a message back into an inbox.Message.
//
// # Limits
//
// Pub/Sub's documented limits ("Pub/Sub quotas and limits") are checked
// before a message is sent; a message over one fails as permanent
// (publishers.Permanent, dead-lettered by the relay), unsent, with an
// error naming the limit: 10 MB for the encoded message (data,
// attributes, ordering key: MaxMessageBytes, less the topic's name), 100
// attributes (MaxAttributes, the publisher's five included), 256 bytes
// per attribute name, 1,024 bytes per attribute value and 1,024 bytes for
// the ordering key. So is an attribute name starting with goog (Pub/Sub
// reserves it), text that is not UTF-8, and a topic ID Pub/Sub does not
// accept (3 to 255 letters, digits and -_.~+%, starting with a letter).
//
// # Ordering
//
// Pub/Sub keeps the order of messages with the same ordering key
// published to one region, delivered through a subscription that has
// message ordering on. With ordering on (the default), a keyed event's Key
// is its ordering key, the client publishes with EnableMessageOrdering,
// and the subscriptions must be created with message ordering enabled;
// events without a key are unordered and spread freely. Clients
// publishing to several regions (different endpoints) get no order
// between them.
//
// Google's client sends a key's messages one request at a time, in order,
// and pauses the key after a failed publish: every later message of the
// key fails (ErrPublishingPaused) until ResumePublish. The Publisher
// resumes a key at the start of each Publish call that sends it — the
// relay re-sends a key's failed event before anything later of the key —
// but only once nothing of the key from an earlier call is still in the
// client (a call whose context ended leaves its messages there, to be sent
// or to fail within publish_timeout; the next call of the key waits for
// them, or fails as unavailable, unsent, when its own context ends first).
// So a resumed key can never let a later message overtake an earlier one
// that failed.
//
// Within one call, then, a key's messages are stored in order and, once
// one fails, none after it of the key is stored: they fail too. The
// Publisher therefore declares publishers.OrderKeeper (KeepsKeyOrder true
// with ordering on, false with ordering=false), and the relay may send a
// key's events in one call. A message not sent because an earlier one of
// its key failed takes the first failure's class when that is an outage
// or a refusal, and no class otherwise.
//
// # Errors
//
// Publish classifies each message's error for the relay:
//
//   - Misconfigured: the topic or project does not exist (NotFound), the
//     credentials or their permissions are refused (PermissionDenied,
//     Unauthenticated), no credentials were found.
//   - Unavailable: Pub/Sub cannot be reached or cannot take it now
//     (Unavailable, DeadlineExceeded, ResourceExhausted, Aborted,
//     Internal, connection errors), the call's context ended, the
//     publisher is closed.
//   - Permanent: over a limit (see Limits), or refused by Pub/Sub as
//     invalid (InvalidArgument: e.g. against the topic's schema). Pub/Sub
//     refuses a request as a whole, so when more than one message of a
//     call was refused the Publisher re-sends them one at a time and
//     classifies as permanent only those refused alone.
//
// Check proves the configuration at start: for each check_topics topic it
// asks Pub/Sub (TestIamPermissions, which needs no permission; GetTopic
// on the emulator, which has no IAM) whether the credentials may publish
// to it; a missing topic is Misconfigured. Without check_topics it probes
// the topic topic_prefix+"outbox-check" the same way, proving the
// credentials and the project.
//
// # Batching
//
// The client batches a topic's messages (per ordering key with ordering
// on). The Publisher sets its PublishSettings for the relay's batches of
// up to 1,000 events, which it publishes at once and then awaits: a
// request closes at 100 messages (CountThreshold) or 1 MiB
// (ByteThreshold), so a batch of 1,000 goes out as ten concurrent requests
// rather than one; a partial request leaves after 1 ms (DelayThreshold;
// the client's default is 10 ms, which every batch would wait); up to 64
// goroutines send requests per topic (NumGoroutines); flow control is the
// client's default (no limit: the relay bounds what is in flight) and
// Timeout is publish_timeout. With ordering, a request carries one
// ordering key (Pub/Sub's rule), so an ordered call costs at least a
// request per key it holds: the relay's ordered claims take few keys
// with long runs when the backlog has them (about 0.9 × the unordered
// rate over 100 to 1,000 keys on the emulator), but a backlog of many
// keys with a few events each goes at the request rate (0.24 × over
// 100,000 keys of two events; docs/benchmarks.md, "Cloud brokers").
//
// # Subscriber
//
// NewSubscriber consumes a subscription by streaming pull into an inbox:
// a message is acknowledged only after its inbox transaction commits (or
// it proved a duplicate). A failed handler's message is held for the
// backoff (the client extends its lease), then nacked for redelivery;
// with message ordering, the key's later messages delivered meanwhile are
// nacked unhandled, so the key is handled in order. After MaxDeliveries
// deliveries, or at once for a permanent error or a message without
// outbox-id, the message is published to SubscriberConfig.DeadLetterTopic
// with AttrError and the AttrDead* attributes, then acknowledged.
// (Pub/Sub's own dead-letter policy needs at least 5 delivery attempts
// and a service account's permissions; the subscriber does not rely on
// it, so that MaxDeliveries and the error travel with the message.)
// Deliveries are counted by Pub/Sub where the subscription has a
// dead-letter policy, by the Subscriber otherwise.
//
// # Emulator
//
// Tests run against Google's emulator (gcloud beta emulators pubsub
// start --host-port=127.0.0.1:8085) with PUBSUB_EMULATOR_HOST set; the
// emulator checks no credentials and has no IAM, so of the refusals it can
// show only a missing topic or subscription (a wrong project is one).
package pubsub
