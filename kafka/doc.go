// Package kafka is the outbox's Apache Kafka backend (or any broker
// speaking its protocol: Redpanda, WarpStream, …), on
// github.com/twmb/franz-go: a Publisher the relay produces with, and a
// Subscriber that feeds an inbox.Inbox from a consumer group.
//
//	// The relay's side.
//	pub, err := kafka.NewPublisher(&kafka.PublisherConfig{
//		Brokers: []string{"kafka:9092"}, TopicPrefix: "events.",
//	})
//
//	// The consumer's side.
//	sub, err := kafka.NewSubscriber(in, handle, &kafka.SubscriberConfig{
//		Brokers: []string{"kafka:9092"},
//		Topics:  []string{"events.orders"}, TopicPrefix: "events.",
//		Group:   "billing", DeadLetterTopic: "billing.dead",
//	})
//	err = sub.Run(ctx)
//
// Importing the package registers the URL schemes kafka:// and
// kafka+tls:// with package backend (see ConfigFromURL), so that the
// outbox command and backend.OpenBroker can open a Publisher by URL.
//
// # Mapping
//
// A message becomes one record:
//
//   - topic: PublisherConfig.Topic(topic) when set, else
//     PublisherConfig.TopicPrefix + topic (default prefix "": the Kafka
//     topic is the outbox topic);
//   - key: Message.Key (nil when empty, so unkeyed records are spread over
//     the partitions); the default partitioner hashes keys like the Java
//     client (murmur2), so one key always lands in one partition;
//   - value: Message.Payload;
//   - headers: the message's own headers, then HeaderID ("Outbox-Id", the
//     event ID), HeaderType ("Outbox-Type", when not empty) and
//     HeaderCreatedAt ("Outbox-Created-At", RFC 3339 with nanoseconds, when
//     not zero). A message header named like one of these is replaced by
//     the publisher's;
//   - timestamp: the time of the produce call, not Message.CreatedAt:
//     records of a backlog drained after a long outage would otherwise
//     carry old timestamps, which time-based retention (retention.ms)
//     may delete at once and log.message.timestamp.before.max.ms may
//     refuse. CreatedAt travels in HeaderCreatedAt.
//
// Key and Type travel as bytes (the record key, the Outbox-Type header's
// value), so they arrive byte for byte as they were enqueued, whatever
// they hold: no encoding is needed. The Subscriber turns a record back
// into an inbox.Message the same way (Decode).
//
// # Publishing
//
// The producer is idempotent and waits for acknowledgement from all
// in-sync replicas (acks=all). Publish hands every record of a batch to the
// client at once and then waits for all their callbacks or for the
// context: the batch is pipelined. The idempotent producer stores the
// records of one partition in the order they were produced, even when it
// retries, so a key's order survives the pipelining, a key's run of events
// in one call included (see "Key order within a call"). The client does
// not linger (franz-go's default is 10 ms): a partition's first record
// goes out at once, and the records after it gather into the next batch
// while that request is in flight, so a call of one record costs a round
// trip, not a linger; kgo.ProducerLinger in ClientOptions sets one. Kafka
// has no
// broker-side dedup by an application ID (the idempotent producer only
// drops its own retries): consumers deduplicate by the Outbox-Id header
// (the inbox, which the Subscriber feeds).
//
// When a Publish call's context ends first, the records it could not wait
// for are reported as unavailable; the client may still deliver them (the
// relay will publish them again: a duplicate, never a loss).
//
// NewPublisher does not talk to the brokers (franz-go connects lazily).
// Check (publishers.Checker) sends a metadata request for no topic, which
// proves that a broker answers and accepts the credentials: it fails
// classified publishers.Misconfigured when the brokers refuse the SASL
// credentials or mechanism (SASL_AUTHENTICATION_FAILED, or a broker that
// hangs up in answer to them), or hang up on the first request (they want
// SASL or TLS the configuration does not give); classified
// publishers.Unavailable when no broker answers before the context ends.
//
// Publish returns one error per message, classified for the relay:
//
//   - publishers.Permanent: the record is larger than
//     PublisherConfig.MaxRecordBytes or the broker's max.message.bytes
//     (kerr.MessageTooLarge, kerr.RecordListTooLarge), the broker refuses
//     it as invalid (kerr.InvalidRecord, kerr.CorruptMessage: a keyless
//     record on a compacted topic, say), or the topic name is invalid
//     (kerr.InvalidTopicException).
//   - publishers.Misconfigured: the brokers refuse the client: its SASL
//     credentials (noticed at once: the records waiting for a connection
//     fail at the refusal), or an ACL — TOPIC_AUTHORIZATION_FAILED,
//     CLUSTER_AUTHORIZATION_FAILED (the idempotent producer's permission),
//     GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//   - publishers.Unavailable: the publisher is closed, the context ended,
//     the brokers cannot be reached, the record timed out
//     (PublisherConfig.DeliveryTimeout), the topic does not exist
//     (kerr.UnknownTopicOrPartition), or any error Kafka calls retriable
//     (not leader, not enough replicas, …).
//   - anything else (policy violation, …) is left unmarked: the relay
//     retries the message and counts the attempt.
//
// The refusals of the SASL credentials are seen through the client's
// logger and hooks, which the publisher (and the subscriber) installs: a
// kgo.WithLogger in ClientOptions replaces its logger, and such refusals
// then show as the context ending (Unavailable; for Subscriber.Start, as
// its context ending).
//
// A caveat: the broker refuses a whole produce batch when it is larger than
// the topic's max.message.bytes, failing every record in it as too large.
// Keep PublisherConfig.MaxRecordBytes (the client's batch limit, default
// 1,000,012 like the broker's default) at or below the topics'
// max.message.bytes so that the client, which checks one record at a time,
// refuses an oversize record alone.
//
// # Key order within a call
//
// The Publisher keeps each key's order within a Publish call by itself
// (publishers.OrderKeeper; KeepsKeyOrder is true unless
// PublisherConfig.NoKeyRuns, URL key_runs=false), so the relay sends a
// batch's events of a key in one pipelined call instead of one per round
// trip. The promise: a key's message is stored only after every earlier
// one of the key in the call, and once one fails, none of the key's later
// messages in the call is stored; each of those fails with an error
// publishers.IsNotSent, which the relay leaves pending, uncharged. Like
// Pub/Sub's ordering keys it holds within a topic: a key's messages to two
// topics are on two partitions, and a failure of one does not stop the
// other. What it rests on, from franz-go's (v1.22) documentation and
// source:
//
//   - One key, one partition: the default partitioner hashes a non-nil key
//     (murmur2) onto the topic's partitions, as long as their number does
//     not change. (Set NoKeyRuns with a kgo.RecordPartitioner that does
//     not.)
//   - Order through retries: the producer is idempotent (the Publisher
//     forces acks=all, which idempotence needs; ClientOptions must not
//     disable it). It numbers each partition's batches and resends them in
//     order, and the broker refuses a batch out of sequence, so nothing
//     after a batch that failed is stored in the same producer epoch. A
//     batch that may have been stored (its request timed out, or was
//     written to too few replicas) is never failed by a timeout or a
//     context: it is retried until the broker answers (kgo.RecordRetries
//     is unbounded by default).
//   - A failure fails the partition's buffer: when a batch fails (an error
//     the broker does not call retriable; PublisherConfig.DeliveryTimeout,
//     the retry limit or the end of its first record's context, while the
//     batch is known not to be stored), franz-go fails every record it
//     holds for that partition, the later batches too, and moves to a new
//     producer epoch.
//   - But not what comes after: a record produced after that failure goes
//     into a new batch of the new epoch and is sent. The failure reaches
//     the Publisher later, on franz-go's promise goroutine, so a call still
//     handing a key's records to the client could have an earlier one fail
//     and a later one stored.
//
// So a call that carries two messages of a key publishes on a lane: a
// franz-go client of its own (with the same options), which holds no other
// call's records from the start of the call until the last of its records
// is settled, so that no other batch's failure — a response on its way, a
// context that ended, a timeout — can fail a partition's buffer halfway
// through the call. Up to 32 such calls are in flight at once, each on its
// lane (a relay has one per worker); more wait for a lane to come free.
// While the call hands its records over it holds the lane's write gate: the
// client's writes to the brokers wait (every connection is dialled through
// the gate, under TLS and SASL), so nothing of the call can reach a broker,
// or fail, before the client holds all of it; once a batch fails, every
// later record of its partition is then among those franz-go fails. The
// gate is held for as long as the hand-over takes (about a microsecond a
// record); the acknowledgements are awaited outside it. The records'
// context ends with the call's, but only once they are all handed over. A
// record franz-go would fail alone before sending it (one too large for a
// batch, which franz-go fails while sending the ones after it) the
// Publisher fails itself first, and hands none of the key's later messages
// over. Its bound counts the batch's framing generously: a record within
// about 100 bytes of MaxRecordBytes fails too, in every call. A lane turns
// franz-go's buffer limits off (kgo.MaxBufferedRecords,
// kgo.MaxBufferedBytes), so that no call waits for room while it holds the
// gate: a lane holds one call's records. Calls whose keys are all different
// publish on the Publisher's main client, as before.
//
// One case is left: a topic the brokers keep saying does not exist fails
// the records that wait for it (kgo.UnknownTopicRetries); should that
// happen while a call hands its records over, and the topic then be
// created before the records handed over after it are sent, those would
// be stored after the failed ones.
//
// # Subscribing
//
// The Subscriber polls with auto-commit off. Each record runs through
// Inbox.Handle: the handler's effect and the record's inbox record commit
// in one transaction, and only then is the record's offset committed. A
// duplicate — a record whose Outbox-Id the inbox holds already — is
// committed without running the handler. A crash between the transaction
// and the offset commit makes the group read the record again: a duplicate,
// which the inbox drops.
//
// Records of one partition are handled in order, one at a time; the
// partitions of a polled batch are handled in parallel. So
// SubscriberConfig.Options.Concurrency is ignored: the parallelism is the
// number of partitions a member is assigned; to handle more at once, give
// the topics more partitions and the group more members. The next poll
// waits for the whole batch, and the group may not rebalance meanwhile
// (BlockRebalanceOnPoll), so a partition never moves while one of its
// records is being handled.
//
// Kafka has no per-record negative acknowledgement: a partition is a log,
// and its committed offset says how far it has been handled. A failed
// record is therefore retried in place, after a backoff (Options.Backoff,
// doubling), up to Options.MaxDeliveries times; then — or at once for an
// error marked inbox.Permanent or a record without a usable Outbox-Id — it
// is produced to SubscriberConfig.DeadLetterTopic with its key, value and
// headers and the Outbox-Error, Outbox-Deliveries, Outbox-Topic,
// Outbox-Partition, Outbox-Offset and Outbox-Group headers, and its offset
// committed. While a record is retried the rest of its partition waits
// behind it: a failing record delays every later record of its partition
// by up to the sum of its backoffs. A dead-letter produce that fails is
// tried again until it succeeds, holding the partition. Keep
// MaxDeliveries × Backoff.Max well below the group's rebalance timeout, or
// a member that is slow to rejoin is removed from the group; its records
// are read again by their new owner and dropped by the inbox.
//
// The delivery count is kept in memory: a record read again after a
// restart or a rebalance starts again at 1. Settlements (Options.Hooks)
// name the record's Kafka topic as their Source; the subscriber's log lines
// give its partition and offset.
//
// Start pings the brokers with the client's credentials and fails at once,
// with the refusal in its error, when they refuse them
// (SASL_AUTHENTICATION_FAILED, or a broker that hangs up in answer to the
// SASL credentials), or hang up on the first request (they want SASL or
// TLS the configuration does not give). The client's warnings and errors
// go to Options.Logger.
//
// Stop stops polling, lets the records being handled finish and commits
// their offsets, and leaves the group. Records polled but not started, and
// a record waiting for a retry, are left uncommitted, for the partition's
// next owner. A Stop whose context ends cancels the handlers; their
// records are released (subscribers.ActionRelease), uncommitted, never
// dead-lettered.
//
// # URLs
//
// ConfigFromURL (and backend.OpenBroker, through the registered schemes)
// takes kafka://[user:password@]host:port[,host:port…][?params]: every
// PublisherConfig setting but Topic and Logger is a query parameter, and
// an unknown parameter is an error naming it. Passwords never appear in
// errors or logs.
package kafka
