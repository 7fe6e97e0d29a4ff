// Package redis publishes outbox messages to Redis Streams with
// github.com/redis/go-redis/v9.
//
// # Mapping
//
// A message becomes one stream entry, appended with XADD (ID "*", so Redis
// numbers entries in append order) to the stream Config.Stream(topic)
// when set, else Config.StreamPrefix + topic (default prefix "": the
// stream key is the topic). Every entry has the same fields, in this order:
//
//   - FieldID ("id"): the event ID (the consumer's dedup key);
//   - FieldKey ("key"): Message.Key, "" when none;
//   - FieldType ("type"): Message.Type, "" when none;
//   - FieldPayload ("payload"): Message.Payload, bytes as they are;
//   - FieldCreatedAt ("created_at"): Message.CreatedAt in RFC 3339 with
//     nanoseconds, "" when zero;
//   - FieldHeaders ("headers"): Message.Headers as a JSON object of
//     strings, "{}" when none.
//
// With Config.MaxLen > 0 every XADD trims the stream to about that many
// entries (MAXLEN ~ n): Redis trims whole macro nodes, so the stream may
// hold somewhat more. Trimming drops the oldest entries whether or not a
// consumer group read them.
//
// # Delivery
//
// Publish sends a batch as one pipeline (one round trip) and reports each
// XADD's own result. Redis acknowledges an entry once it is in memory;
// whether it survives a Redis crash depends on the server's persistence
// (appendonly yes, appendfsync) and replication (see WAIT), which the
// publisher does not change. The entries of one pipeline are appended in
// order, but one that fails does not stop the next: Capabilities reports
// OrderedRetries false. Redis 7 keeps no record of entry IDs chosen by the
// application, so Capabilities reports Dedup false; consumers deduplicate
// by the "id" field (the inbox).
//
// The client the publisher makes does not retry commands itself
// (MaxRetries -1, unless the URL sets max_retries to a positive number): a retried XADD whose
// first attempt reached Redis would append the entry twice, and the relay
// retries anyway.
//
// # Errors
//
//   - publishers.Permanent: the payload, or the headers' JSON, is larger
//     than Config.MaxPayload (checked before sending; Redis refuses bulk
//     strings over its proto-max-bulk-len, 512 MiB by default, by closing
//     the connection, which fails the whole pipeline as an outage).
//   - publishers.Unavailable: closed publisher, ended context, network
//     errors and timeouts, a closed client, and the server errors that say
//     Redis cannot take writes now: LOADING, BUSY, MASTERDOWN, TRYAGAIN,
//     CLUSTERDOWN, READONLY, OOM, NOREPLICAS.
//   - unmarked: any other server error (WRONGTYPE: the key is not a
//     stream, …).
//
// # URLs
//
// NewFromURL takes redis://[user:password@]host:port/db?params (or
// rediss:// for TLS) with the query parameters:
//
//   - stream_prefix: Config.StreamPrefix;
//   - maxlen: Config.MaxLen;
//   - max_payload: Config.MaxPayload in bytes.
//
// The other query parameters go-redis knows (dial_timeout, read_timeout,
// pool_size, max_retries, …, see redis.ParseURL) are passed to it.
// Passwords never appear in errors or logs.
package redis
