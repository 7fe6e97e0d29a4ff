// Package kafka publishes outbox messages to Apache Kafka (or any broker
// speaking its protocol: Redpanda, WarpStream, …) with
// github.com/twmb/franz-go.
//
// # Mapping
//
// A message becomes one record:
//
//   - topic: Config.Topic(topic) when set, else Config.TopicPrefix + topic
//     (default prefix "": the Kafka topic is the outbox topic);
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
// # Delivery
//
// The producer is idempotent and waits for acknowledgement from all
// in-sync replicas (acks=all). Publish hands every record of a batch to the
// client at once and then waits for all their callbacks or for the
// context: the batch is pipelined. The idempotent producer stores the
// records of one partition in the order they were produced, even when it
// retries, so Capabilities reports OrderedRetries. Kafka has no broker-side
// dedup by an application ID (the idempotent producer only drops its own
// retries), so Capabilities reports Dedup false: consumers deduplicate by
// the Outbox-Id header (the inbox).
//
// When a Publish call's context ends first, the records it could not wait
// for are reported as unavailable; the client may still deliver them (the
// relay will publish them again: a duplicate, never a loss).
//
// Key and Type travel as bytes (the record key, the Outbox-Type header's
// value), so they arrive byte for byte as they were enqueued, whatever
// they hold: no encoding is needed.
//
// # Errors
//
// New does not talk to the brokers (franz-go connects lazily). Check
// (publishers.Checker) sends a metadata request for no topic, which proves
// that a broker answers and accepts the credentials: it fails classified
// publishers.Misconfigured when the brokers refuse the SASL credentials or
// mechanism (SASL_AUTHENTICATION_FAILED, or a broker that hangs up in
// answer to them), or hang up on the first request (they want SASL or TLS
// the configuration does not give); classified publishers.Unavailable
// when no broker answers before the context ends.
//
// Publish returns one error per message, classified for the relay:
//
//   - publishers.Permanent: the record is larger than Config.MaxRecordBytes
//     or the broker's max.message.bytes (kerr.MessageTooLarge,
//     kerr.RecordListTooLarge), the broker refuses it as invalid
//     (kerr.InvalidRecord, kerr.CorruptMessage: a keyless record on a
//     compacted topic, say), or the topic name is invalid
//     (kerr.InvalidTopicException).
//   - publishers.Misconfigured: the brokers refuse the client: its SASL
//     credentials (noticed at once: the records waiting for a connection
//     fail at the refusal), or an ACL — TOPIC_AUTHORIZATION_FAILED,
//     CLUSTER_AUTHORIZATION_FAILED (the idempotent producer's permission),
//     GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//   - publishers.Unavailable: the publisher is closed, the context ended,
//     the brokers cannot be reached, the record timed out
//     (Config.DeliveryTimeout), the topic does not exist
//     (kerr.UnknownTopicOrPartition), or any error Kafka calls retriable
//     (not leader, not enough replicas, …).
//   - anything else (policy violation, …) is left unmarked: the relay
//     retries the message and counts the attempt.
//
// The refusals of the SASL credentials are seen through the client's
// logger and hooks, which the publisher installs: a kgo.WithLogger in
// Config.Options replaces its logger, and such refusals then show as the
// context ending (Unavailable).
//
// A caveat: the broker refuses a whole produce batch when it is larger than
// the topic's max.message.bytes, failing every record in it as too large.
// Keep Config.MaxRecordBytes (the client's batch limit, default 1,000,012
// like the broker's default) at or below the topics' max.message.bytes so
// that the client, which checks one record at a time, refuses an oversize
// record alone.
//
// # URLs
//
// NewFromURL takes kafka://[user:password@]host:port[,host:port…][?params]
// with the query parameters:
//
//   - topic_prefix: Config.TopicPrefix;
//   - client_id: Config.ClientID;
//   - delivery_timeout: Config.DeliveryTimeout (a Go duration, "30s");
//   - max_record_bytes: Config.MaxRecordBytes;
//   - tls: "true" to connect with TLS (system roots);
//   - sasl: "plain" (default when the URL has a user), "scram-sha-256" or
//     "scram-sha-512".
//
// The scheme kafka+tls:// is kafka:// with tls=true. Passwords never
// appear in errors or logs.
package kafka
