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
// channel error), the messages in flight fail as unavailable and the next
// Publish dials again: the relay recovers without a restart.
//
// # Errors
//
//   - publishers.Permanent: the payload is larger than
//     Config.MaxMessageSize (ErrTooLarge, checked before sending); the
//     message cannot be encoded in AMQP 0-9-1 (ErrNotRepresentable: a
//     routing key, header name or type over 255 bytes, checked before
//     sending); or the broker refused it (ErrRefused): it closed the
//     channel with 406 PRECONDITION_FAILED, e.g. for a message over its
//     max_message_size. Such a close names no message and fails everything
//     in flight on the channel, so the publisher then publishes those
//     messages again one at a time, each on a channel of its own, to tell
//     the refused ones from the rest. That is slow: keep MaxMessageSize at
//     or below the server's max_message_size (default 128 MiB) so that
//     size refusals happen before sending.
//   - publishers.Unavailable: closed publisher, ended context, no
//     connection or channel (dial failed, connection lost, channel closed),
//     no confirm within Config.ConfirmTimeout, the connection blocked by a
//     resource alarm (ErrBlocked: nothing is sent while the broker says
//     connection.blocked).
//   - unmarked: unroutable (ErrUnroutable), nacked by the broker
//     (ErrNacked), or the channel was closed by the server for a reason
//     that names the exchange (404 NOT_FOUND: the exchange does not exist).
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
