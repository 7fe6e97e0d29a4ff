// Package rabbitmq feeds an inbox.Inbox from a RabbitMQ queue: the consumer
// side of publishers/rabbitmq.
//
//	in := inbox.New(inboxDriver, nil)
//	sub, _ := rabbitmq.New(in, handler, rabbitmq.Config{
//		URL: "amqp://…", Queue: "billing",
//		DeadLetterRoutingKey: "billing.dead", // a queue, via the default exchange
//	})
//	_ = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// # Delivery
//
// The subscriber consumes Config.Queue with manual acknowledgements and a
// prefetch of Config.Concurrency. Each message runs through Inbox.Handle:
// the handler's effect and the message's inbox record commit in one
// transaction, and only then is the message acknowledged. A duplicate — a
// message whose ID (the MessageId property) the inbox holds already — is
// acknowledged without running the handler. A connection lost between
// commit and ack makes the broker deliver the message again: a duplicate.
//
// # Retries and the delivery count
//
// AMQP 0-9-1 has no delayed negative acknowledgement, and a classic queue
// does not count deliveries (only the Redelivered flag), so the subscriber
// counts them itself. After a handler error it holds the message for the
// backoff (Config.Backoff, doubling with each delivery), then republishes a
// copy straight to the queue (default exchange, routing key Queue) with the
// x-outbox-deliveries header incremented, waits for the broker's confirm,
// and acknowledges the original. The delivery count is 1 +
// x-outbox-deliveries, plus x-delivery-count when the queue is a quorum
// queue (which counts the redeliveries of a copy after a consumer died or
// requeued it); on a classic queue such redeliveries are not counted, so a
// message that kills its consumer every time is delivered forever: use a
// quorum queue to have those counted and the message dead-lettered.
// Consequences: the retried copy goes to the back of the queue, so order is
// not kept across a retry; a held message takes one prefetch slot for the
// whole backoff; and a crash between the republish and the ack leaves two
// copies, one of which the inbox drops. Nack(requeue=true) is used only to
// hand a message back without counting it: on Stop, after a hard stop
// cancelled its handler, or when a republish or dead-letter publish fails.
//
// After Config.MaxDeliveries deliveries, or at once for an error marked
// inbox.Permanent or a message without a UUID MessageId, the message is
// published to Config.DeadLetterExchange with Config.DeadLetterRoutingKey,
// its properties and headers kept and Outbox-Error, x-outbox-deliveries,
// Outbox-Queue, Outbox-Exchange and Outbox-Routing-Key added, and then
// acknowledged. The dead-letter destination must route to a queue: an
// unroutable dead letter is confirmed by the broker and lost.
//
// # Connection
//
// When the connection drops, in-flight handlers finish (their acks fail,
// and the broker delivers the messages again) and the subscriber dials
// again, waiting Config.ReconnectDelay, doubling up to 30s. Config.Setup
// runs on every new connection, so a topology it declares is restored.
//
// # Errors
//
// Start connects at once: a broker that cannot be reached, or that
// refuses the subscriber, fails Start — it does not retry. When the broker
// refuses the configuration — wrong credentials (403 ACCESS_REFUSED), an
// unknown vhost or one the user may not use (530 NOT_ALLOWED), a missing
// queue (404 NOT_FOUND), no permission on it (403) — the error wraps
// ErrRefused (see publishers/rabbitmq's ConfigRefusal): retrying does not
// help until someone fixes the configuration. Other errors (broker
// unreachable) are returned as they are; retrying Start is the caller's
// choice. Once running, a failed reconnection is logged as a warning, a
// refused one (the queue deleted, the user's password changed) as an
// error, at every attempt. URLs in errors and logs have their password
// hidden.
//
// # Stop
//
// Stop cancels the consumer, lets in-flight handlers finish and
// acknowledges their messages; messages delivered but not started, and
// those waiting for a retry, are handed back with Nack(requeue=true).
package rabbitmq
