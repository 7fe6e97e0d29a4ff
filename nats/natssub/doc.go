// Package nats feeds an inbox.Inbox from a NATS JetStream durable pull
// consumer: the consumer side of publishers/nats.
//
//	in := inbox.New(inboxDriver, nil)
//	sub, _ := nats.New(js, in, handler, nats.Config{
//		Stream: "EVENTS", Durable: "billing",
//		FilterSubjects:    []string{"EVENTS.orders.>"},
//		DeadLetterSubject: "DEAD.billing", // captured by a stream of its own
//	})
//	_ = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// # Messages
//
// Decode reads what publishers/nats wrote: the ID from Nats-Msg-Id, Key and
// Type from Outbox-Key-Base64 and Outbox-Type-Base64 when they are set
// (base64 of a key or type a NATS header would alter: leading or trailing
// spaces or TABs, CR, LF), else from Outbox-Key and Outbox-Type, so that
// the handler gets them byte for byte as they were enqueued; CreatedAt
// from Outbox-Created-At; the other headers, but Nats-* and the
// publisher's own, as inbox.Message.Headers. A message whose ID or
// encoded headers cannot be read is dead-lettered at once.
//
// # Refusals
//
// The subscriber works on a connection the caller makes: a server that
// refuses its credentials fails nats.Connect. Start asks JetStream for the
// account's information first, and fails at once, saying so, when the
// server refuses JetStream to the account.
//
// # Delivery
//
// Each message runs through Inbox.Handle: the handler's effect and the
// message's inbox record commit in one transaction, and only then is the
// message acknowledged (and the ack confirmed by the server). A duplicate —
// a message whose ID the inbox holds already — is acknowledged without
// running the handler. A crash between commit and ack makes JetStream
// redeliver the message after AckWait; the redelivery is a duplicate, so the
// effect happens once.
//
// A failed handler is negatively acknowledged with a delay that doubles with
// each delivery (Config.Backoff). After Config.MaxDeliver deliveries, or at
// once for an error marked inbox.Permanent or a message without a usable
// Nats-Msg-Id (or with an encoded key or type that is not base64), the message is published to Config.DeadLetterSubject with the
// error in the Outbox-Error header, and then acknowledged.
//
// The subscriber counts deliveries itself and leaves the server's MaxDeliver
// unlimited: a message the server stops delivering stays in the stream,
// unacknowledged and never dead-lettered. Here a message delivered more than
// MaxDeliver times (its earlier deliveries ended in a crash or a stall) is
// dead-lettered without running the handler again — unless the inbox shows
// it was handled, in which case it is acknowledged — and a message whose
// dead-letter publish fails is redelivered until the publish succeeds. (The
// server refuses a consumer BackOff list with an unlimited MaxDeliver, so
// retries are spaced by NakWithDelay, and a crashed consumer's messages come
// back after AckWait.)
//
// # Stop
//
// Stop stops fetching, lets in-flight handlers finish and acknowledges
// their messages; messages fetched but not yet started are handed back
// (Nak) for another instance. Several instances may share one durable
// consumer: JetStream gives each message to one at a time, and the inbox
// catches the redeliveries that overlap.
//
// While the connection is down (when Stop is called, or while it waits),
// and once Stop's context has ended, Stop does not wait on the server: it
// stops the iterator instead of draining it, and acks stop waiting for
// their confirmation. The in-flight handlers still finish and commit.
// Nothing is lost: what is left unacknowledged JetStream redelivers after
// AckWait, and a message whose handler committed comes back as a
// duplicate.
package nats
