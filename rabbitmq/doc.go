// Package rabbitmq publishes outbox messages to RabbitMQ (AMQP 0-9-1) with
// github.com/rabbitmq/amqp091-go.
//
// # Mapping
//
// A message is published to the exchange Config.Exchange (default "", the
// default exchange, which routes to the queue named by the routing key)
// with the routing key Config.RoutingKey(topic) (default: the topic). It is
// published mandatory and persistent (delivery mode 2), with:
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
// # Delivery
//
// The channel is in confirm mode. Publish sends a whole batch pipelined
// (PublishWithDeferredConfirmWithContext for every message) on one channel,
// then waits for every confirm, for Config.ConfirmTimeout, or for the
// context. A message the broker acks is stored (persistent, in every queue
// it was routed to). A message no queue takes comes back as a basic.return
// (mandatory): it fails with ErrUnroutable, unmarked, so the relay retries
// it and dead-letters it once its attempts run out.
//
// RabbitMQ has no broker-side dedup of message IDs: Capabilities reports
// Dedup false, consumers deduplicate by MessageId (the inbox). A failed
// message is not retried in order with the ones after it: OrderedRetries is
// false (messages of one call on one channel are stored in call order).
//
// When the connection or the channel closes (broker down, network cut,
// channel error), the messages in flight fail and the next Publish dials
// again: the relay recovers without a restart.
//
// # Errors
//
// Every path that publishes — a batch, and a message published again alone
// (below) — first refuses what the publisher never sends, the same way
// whatever happens to the rest of the batch.
//
//   - publishers.Misconfigured: the broker refuses the configuration, at
//     New (the dial) or later, when it closes the channel or the
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
//     Config.MaxMessageSize (ErrTooLarge); the message cannot be encoded in
//     AMQP 0-9-1 (ErrNotRepresentable: a routing key, header name or type
//     over 255 bytes); it has a header named CC or BCC (ErrReservedHeader)
//     — all three checked before sending; or the broker refused it
//     (ErrRefused): it closed the channel with 406 PRECONDITION_FAILED,
//     e.g. for a message over its max_message_size. Such a close names no
//     message and fails everything in flight on the channel, so the
//     publisher then publishes those messages again one at a time, each on
//     a channel of its own, to tell the refused ones from the rest. That is
//     slow: keep MaxMessageSize at or below the server's max_message_size
//     (default 128 MiB) so that size refusals happen before sending.
//   - publishers.Unavailable: closed publisher, ended context, no
//     connection or channel (dial failed, connection lost, channel closed
//     for another reason), no confirm within Config.ConfirmTimeout, the
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
// NewFromURL takes amqp://user:password@host:port/vhost?params (or
// amqps://) with the query parameters:
//
//   - exchange: Config.Exchange;
//   - routing_key_prefix: routing key = prefix + topic;
//   - confirm_timeout: Config.ConfirmTimeout (a Go duration);
//   - max_message_size: Config.MaxMessageSize in bytes;
//   - connection_name: Config.Name.
//
// The other query parameters amqp091 knows (heartbeat, channel_max,
// frame_max, connection_timeout, auth_mechanism, …) are passed through to
// it. Passwords never appear in errors or logs.
package rabbitmq
