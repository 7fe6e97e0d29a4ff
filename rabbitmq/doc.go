// Package rabbitmq is the RabbitMQ (AMQP 0-9-1) backend of the outbox, with
// github.com/rabbitmq/amqp091-go: a Publisher that the relay publishes
// outbox messages with, and a Subscriber that feeds an inbox.Inbox from a
// queue, the consumer side of the same messages.
//
//	// The relay's side: every message to the exchange "events", routing key = topic.
//	pub, err := rabbitmq.NewPublisher(&rabbitmq.PublisherConfig{
//		URL: "amqp://user:pass@host:5672/", Exchange: "events",
//	})
//
//	// The consumer's side: the queue "billing", bound to "events".
//	sub, err := rabbitmq.NewSubscriber(in, handler, &rabbitmq.SubscriberConfig{
//		URL: "amqp://user:pass@host:5672/", Queue: "billing",
//		DeadLetterRoutingKey: "billing.dead", // a queue, via the default exchange
//		Options: subscribers.Options{MaxDeliveries: 5},
//	})
//	err = sub.Run(ctx)
//
// Importing the package also registers the URL schemes amqp and amqps with
// package backend, for tools that open a broker by URL (the outbox CLI's
// relay --broker-url): see ConfigFromURL.
//
// # Mapping
//
// A message is published to the exchange PublisherConfig.Exchange (default
// "", the default exchange, which routes to the queue named by the routing
// key) with the routing key PublisherConfig.RoutingKey(topic) (default: the
// topic). It is published mandatory and persistent (delivery mode 2),
// with:
//
//   - MessageId: the event ID (the consumer's dedup key);
//   - Type: Message.Type;
//   - Timestamp: Message.CreatedAt (AMQP timestamps have whole seconds;
//     the header HeaderCreatedAt, "Outbox-Created-At", has it in RFC 3339
//     with nanoseconds);
//   - headers (an amqp.Table of strings): the message's own headers, then
//     HeaderKey ("Outbox-Key", Message.Key, when not empty) and
//     HeaderCreatedAt. A message header named like one of these is replaced
//     by the publisher's;
//   - body: Message.Payload.
//
// The subscriber reads it back the same way (Decode): the topic is the
// routing key less SubscriberConfig.RoutingKeyPrefix.
//
// AMQP strings are binary-safe: keys, types and header values arrive byte
// for byte (spaces, CR, LF, non-ASCII included).
//
// RabbitMQ reads the headers named CC and BCC (exactly so; it matches
// them case-sensitively) as sender-selected distribution: more routing
// keys to deliver the message with. A message with such a header would go
// where its publisher did not send it (or, with a string value, make the
// broker close the channel), so the publisher refuses it before sending:
// it fails as publishers.Permanent with ErrReservedHeader. Enqueue cannot
// refuse these names for every broker; name such headers otherwise ("Cc"
// and "cc" pass).
//
// # Publishing
//
// The channel is in confirm mode. Publish sends a whole batch pipelined
// (PublishWithDeferredConfirmWithContext for every message) on one channel,
// then waits for every confirm, for PublisherConfig.ConfirmTimeout, or for
// the context. A message the broker acks is stored (persistent, in every
// queue it was routed to). A message no queue takes comes back as a
// basic.return (mandatory): it fails with ErrUnroutable, unmarked, so the
// relay retries it and dead-letters it once its attempts run out.
//
// RabbitMQ has no broker-side dedup of message IDs: consumers deduplicate
// by MessageId (the inbox does). A failed message is not retried in order
// with the ones after it (messages of one call on one channel are stored
// in call order).
//
// When the connection or the channel closes (broker down, network cut,
// channel error), the messages in flight fail and the next Publish dials
// again: the relay recovers without a restart.
//
// # Cost on the broker
//
// Measured on RabbitMQ 3.10 (durable classic queue, persistent messages,
// confirms; integration/relay's BenchmarkRabbitMQPublishCost, see
// docs/benchmarks.md), a message of this publisher costs the broker about
// 1.35–1.45 × the CPU of one with only the delivery mode and MessageId.
// Most of it is not the headers as such but the size of the properties
// block: up to 64 bytes (flags included) a message costs the same, past 64
// bytes about 12 µs of broker CPU more, whatever pushes it past (a header,
// or a longer Type). The flags, the delivery mode and the MessageId take
// 40 of the 64, so the key, type and creation time cannot fit. The mandatory flag costs about 5 µs
// more; it is what makes an unroutable message fail instead of being
// acknowledged and dropped, and nothing cheaper gives that per message
// (routing may depend on each message's headers, or on bindings that
// change between two messages), so it stays.
//
// # Publishing errors
//
// Every path that publishes — a batch, and a message published again alone
// (below) — first refuses what the publisher never sends, the same way
// whatever happens to the rest of the batch.
//
//   - publishers.Misconfigured: the broker refuses the configuration, at
//     NewPublisher (the dial) or later, when it closes the channel or the
//     connection with 403 ACCESS_REFUSED (wrong credentials; no permission
//     to write to the exchange; an internal exchange), 404 NOT_FOUND (the
//     exchange does not exist, or was deleted) or 530 NOT_ALLOWED (an
//     unknown vhost, or one the user may not use; a connection limit
//     reached is no refusal). Every message the close failed is
//     Misconfigured (ErrConfigRefused): it is no event's fault, so the
//     relay charges no attempt, pauses and logs the refusal as an error;
//     the next Publish dials again, and publishes once someone fixed the
//     configuration. See ConfigRefusal.
//   - publishers.Permanent: the payload is larger than
//     PublisherConfig.MaxMessageSize (ErrTooLarge); the message cannot be
//     encoded in AMQP 0-9-1 (ErrNotRepresentable: a routing key, header
//     name or type over 255 bytes); it has a header named CC or BCC
//     (ErrReservedHeader) — all three checked before sending; or the
//     broker refused it (ErrMessageRefused): it closed the channel with 406
//     PRECONDITION_FAILED, e.g. for a message over its max_message_size.
//     Such a close names no message and fails everything in flight on the
//     channel, so the publisher then publishes those messages again one at
//     a time, each on a channel of its own, to tell the refused ones from
//     the rest. That is slow: keep MaxMessageSize at or below the server's
//     max_message_size (default 128 MiB) so that size refusals happen
//     before sending.
//   - publishers.Unavailable: closed publisher, ended context, no
//     connection or channel (dial failed, connection lost, channel closed
//     for another reason), no confirm within ConfirmTimeout, the
//     connection blocked by a resource alarm (ErrBlocked: nothing is sent
//     while the broker says connection.blocked).
//   - unmarked (retried, then dead-lettered): unroutable (ErrUnroutable),
//     nacked by the broker (ErrNacked).
//
// # Check
//
// Publisher implements publishers.Checker. Check dials a connection of its
// own (the credentials and the vhost), declares the exchange passively
// (it must exist; the default exchange "" always does), and publishes a
// probe message in a transaction that it rolls back: RabbitMQ checks the
// write permission and whether the exchange is internal when a message is
// published, and delivers it only at a commit that never comes. A refusal
// is Misconfigured, an unreachable broker Unavailable. Topic permissions
// depend on the routing key, which Check does not know: they are checked
// at Publish.
//
// # URLs
//
// ConfigFromURL (and backend.OpenBroker, through the registered schemes)
// takes amqp://user:password@host:port/vhost?params (or amqps://) with the
// query parameters:
//
//   - exchange: PublisherConfig.Exchange;
//   - routing_key_prefix: routing key = prefix + topic;
//   - confirm_timeout: PublisherConfig.ConfirmTimeout (a Go duration);
//   - dial_timeout: PublisherConfig.DialTimeout (a Go duration), or
//     connection_timeout, RabbitMQ's URI name of it, in milliseconds;
//   - max_message_size: PublisherConfig.MaxMessageSize in bytes;
//   - connection_name: PublisherConfig.Name.
//
// An empty value, or zero, means the default. The other query parameters
// amqp091 reads — heartbeat, channel_max, auth_mechanism, and for amqps://
// cacertfile, certfile, keyfile and server_name_indication — are passed
// through to it. Any other parameter is an error that names it. Passwords
// never appear in errors or logs.
//
// # Consuming
//
// The subscriber consumes SubscriberConfig.Queue with manual
// acknowledgements and a prefetch of Options.Concurrency. Each message
// runs through Inbox.Handle: the handler's effect and the message's inbox
// record commit in one transaction, and only then is the message
// acknowledged. A duplicate — a message whose ID (the MessageId property)
// the inbox holds already — is acknowledged without running the handler. A
// connection lost between commit and ack makes the broker deliver the
// message again: a duplicate.
//
// # Retries and the delivery count
//
// AMQP 0-9-1 has no delayed negative acknowledgement, and a classic queue
// does not count deliveries (only the Redelivered flag), so the subscriber
// counts them itself. After a handler error it holds the message for the
// backoff (Options.Backoff, doubling with each delivery), then republishes
// a copy straight to the queue (default exchange, routing key Queue) with
// the x-outbox-deliveries header incremented, waits for the broker's
// confirm, and acknowledges the original. The delivery count is 1 +
// x-outbox-deliveries, plus x-delivery-count when the queue is a quorum
// queue (which counts the redeliveries of a copy after a consumer died or
// requeued it); on a classic queue such redeliveries are not counted, so a
// message that kills its consumer every time is delivered forever: use a
// quorum queue to have those counted and the message dead-lettered.
// Consequences: the retried copy goes to the back of the queue, so order is
// not kept across a retry; a held message takes one prefetch slot for the
// whole backoff; and a crash between the republish and the ack leaves two
// copies, one of which the inbox drops. Nack(requeue=true) is used only to
// hand a message back without counting it (subscribers.ActionRelease): on
// Stop, after a hard stop cancelled its handler, or when a republish or
// dead-letter publish fails.
//
// After Options.MaxDeliveries deliveries, or at once for an error marked
// inbox.Permanent or a message without a UUID MessageId, the message is
// published to SubscriberConfig.DeadLetterExchange with
// DeadLetterRoutingKey, its properties and headers kept and Outbox-Error,
// x-outbox-deliveries, Outbox-Queue, Outbox-Exchange and Outbox-Routing-Key
// added, and then acknowledged. The dead-letter destination must route to
// a queue: an unroutable dead letter is confirmed by the broker and lost.
//
// The Options' hooks see every delivery: AfterCommit once its transaction
// committed (or it proved a duplicate), AfterSettle once it is settled,
// with its routing key as subscribers.Settlement.Source.
//
// # Connection
//
// When the connection drops, in-flight handlers finish (their acks fail,
// and the broker delivers the messages again) and the subscriber dials
// again, waiting SubscriberConfig.ReconnectDelay, doubling up to 30 s.
// SubscriberConfig.Setup runs on every new connection, so a topology it
// declares is restored.
//
// # Subscriber errors
//
// Start connects at once: a broker that cannot be reached, or that
// refuses the subscriber, fails Start — it does not retry. When the broker
// refuses the configuration — wrong credentials (403 ACCESS_REFUSED), an
// unknown vhost or one the user may not use (530 NOT_ALLOWED), a missing
// queue (404 NOT_FOUND), no permission on it (403) — the error wraps
// ErrConfigRefused (see ConfigRefusal): retrying does not help until
// someone fixes the configuration. Other errors (broker unreachable) are
// returned as they are; retrying Start is the caller's choice. Once
// running, a failed reconnection is logged as a warning, a refused one
// (the queue deleted, the user's password changed) as an error, at every
// attempt. URLs in errors and logs have their password hidden.
//
// # Stop
//
// Stop cancels the consumer, lets in-flight handlers finish and
// acknowledges their messages; messages delivered but not started, and
// those waiting for a retry, are handed back with Nack(requeue=true).
package rabbitmq
