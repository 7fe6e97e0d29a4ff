// Package kafka feeds an inbox.Inbox from Kafka topics through a consumer
// group (franz-go): the consumer side of publishers/kafka.
//
//	in := inbox.New(inboxDriver, nil)
//	sub, _ := kafka.New(in, handler, kafka.Config{
//		Brokers: []string{"kafka:9092"},
//		Topics:  []string{"events.orders"}, TopicPrefix: "events.",
//		Group:   "billing", DeadLetterTopic: "billing.dead",
//	})
//	_ = sub.Start(ctx)
//	defer sub.Stop(ctx)
//
// # Delivery
//
// The client polls with auto-commit off. Each record runs through
// Inbox.Handle: the handler's effect and the record's inbox record commit
// in one transaction, and only then is the record's offset committed. A
// duplicate — a record whose Outbox-Id the inbox holds already — is
// committed without running the handler. A crash between the transaction
// and the offset commit makes the group read the record again: a duplicate.
//
// # Retries and head-of-line blocking
//
// Kafka has no per-record negative acknowledgement: a partition is a log,
// and its committed offset says how far it has been handled. A failed
// record is therefore retried in place, after a backoff (Config.Backoff,
// doubling), up to Config.MaxDeliveries times; then — or at once for an
// error marked inbox.Permanent or a record without a usable Outbox-Id — it
// is produced to Config.DeadLetterTopic with its key, value and headers and
// the Outbox-Error, Outbox-Deliveries, Outbox-Topic, Outbox-Partition,
// Outbox-Offset and Outbox-Group headers, and its offset committed. While a
// record is retried the rest of its partition waits behind it: a failing
// record delays every later record of its partition by up to the sum of
// its backoffs. A dead-letter produce that fails is tried again until it
// succeeds, holding the partition.
//
// Records of one partition are handled in order, one at a time; the
// partitions of a polled batch are handled in parallel. The next poll
// waits for the whole batch, and the group may not rebalance meanwhile
// (BlockRebalanceOnPoll), so a partition never moves while one of its
// records is being handled. Keep MaxDeliveries × Backoff.Max well below the
// group's rebalance timeout, or a member that is slow to rejoin is removed
// from the group; its records are read again by their new owner and
// dropped by the inbox.
//
// The delivery count is kept in memory: a record read again after a
// restart or a rebalance starts again at 1.
//
// # Refusals
//
// Start pings the brokers with the client's credentials and fails at once,
// with the refusal in its error, when they refuse them
// (SASL_AUTHENTICATION_FAILED, or a broker that hangs up in answer to the
// SASL credentials), or hang up on the first request (they want SASL or
// TLS the configuration does not give). The client's warnings and errors go
// to Config.Logger (its logger and hooks are the subscriber's: a
// kgo.WithLogger in Config.Options replaces them, and a refusal then shows
// as Start's context ending).
//
// Key and Type are the record's key and the Outbox-Type header's value:
// bytes, byte for byte as they were enqueued.
//
// # Stop
//
// Stop stops polling, lets the records being handled finish and commits
// their offsets, and leaves the group. Records polled but not started, and
// a record waiting for a retry, are left uncommitted, for the partition's
// next owner.
package kafka
